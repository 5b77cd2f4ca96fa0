// What the suites do in the console as a user would, through the app's stable selectors (the
// data-testid attributes listed in web/TESTIDS.md): log in, log out, open a task. Kept in one
// place so that a renamed selector is changed once.
import { timeouts } from "./harness.mjs";

// Logs in on /login with an access key and its secret key and waits for the overview.
export async function login(page, { accessKey, secretKey }) {
  await page.goto("/login");
  await page.getByTestId("login-access-key").fill(accessKey);
  await page.getByTestId("login-secret-key").fill(secretKey);
  await page.getByTestId("login-submit").click();
  await page.getByTestId("page-overview").waitFor();
}

export async function logout(page) {
  await page.getByTestId("logout").click();
  await page.getByTestId("login-form").waitFor();
}

// Waits until the task page's state badge shows `state` (the page follows the live event
// stream: no reload).
export async function waitForTaskState(page, state, timeout = timeouts.task) {
  await page.locator(`[data-testid="task-state"][data-state="${state}"]`).waitFor({ timeout });
}

// A fetch from inside the page (same origin, the session's cookie, no CSRF header unless given):
// {status, body}.
export async function pageFetch(page, method, path, { body, headers = {} } = {}) {
  return page.evaluate(async ({ method, path, body, headers }) => {
    const init = { method, credentials: "same-origin", headers: { ...headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["content-type"] = "application/json";
    }
    const r = await fetch(path, init);
    const text = await r.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON: the caller looks at the status
    }
    return { status: r.status, body: json, text };
  }, { method, path, body, headers });
}
