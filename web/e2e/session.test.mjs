// console_e2e.Session: the console's page and its sessions in a real Chromium against a real
// `gpupool up` — served under its Content-Security-Policy, login signed in the page (the secret
// never crosses the network) into an HttpOnly SameSite=Strict cookie, a wrong secret refused
// with the server's reason and an unknown key beside its field, login by keyboard alone, the
// shell in a narrow window, state-changing requests refused without the CSRF token, a reload
// keeping the session, a session dying with its key, and logout ending it on the server (the
// old cookie no longer works).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { login, logout, pageFetch } from "./console.mjs";
import { createMember, useSuite } from "./harness.mjs";

// docs/api.md / the contract: the policy every console response carries.
const kCsp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: " +
             "blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
             "form-action 'self'; frame-ancestors 'none'";

describe("Session", () => {
  let member;
  const suite = useSuite("session", { setUp: async ({ pool }) => {
    member = await createMember(pool.api, { project: "p-web", user: "u-web" });
  } });
  const step = (name, body) => it(name, () => suite.withPage(name, body));

  step("serves the console at any client route under its security headers", async (page) => {
    await page.addInitScript(() => {
      window.__cspViolations = [];
      document.addEventListener("securitypolicyviolation",
        (e) => window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const response = await page.goto("/tasks/t-1");  // a client-side route: index.html
    assert.equal(response.status(), 200);
    const h = response.headers();
    assert.match(h["content-type"], /^text\/html/);
    assert.equal(h["content-security-policy"], kCsp);
    assert.equal(h["x-content-type-options"], "nosniff");
    assert.equal(h["x-frame-options"], "DENY");
    assert.equal(h["referrer-policy"], "no-referrer");
    assert.equal(h["cache-control"], "no-cache");
    await page.getByTestId("login-form").waitFor();  // no session: the login page
    assert.deepEqual(await page.evaluate(() => window.__cspViolations), [],
                     "the app runs under the CSP: no inline script or style");
  });

  step("logs in with a signed request; the secret key never crosses the network",
       async (page, context) => {
    const sent = [];
    page.on("request", (r) => sent.push(r));
    await login(page, member);
    await page.getByTestId("whoami").filter({ hasText: member.user }).waitFor();

    const cookie = (await context.cookies()).find((c) => c.name === "gpupool_session");
    assert.ok(cookie, "the session cookie is set");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");
    assert.equal(cookie.path, "/");
    assert.ok(cookie.expires > Date.now() / 1000, "the cookie has an expiry (Max-Age)");
    assert.ok(cookie.value.length >= 43, `a ≥256-bit value, got ${cookie.value.length} chars`);
    assert.equal(await page.evaluate(() => document.cookie.includes("gpupool_session")), false,
                 "scripts cannot read the session cookie");

    const logins = sent.filter((r) => r.method() === "POST" &&
                                      new URL(r.url()).pathname === "/v1/console/sessions");
    assert.equal(logins.length, 1, "one login request");
    assert.match((await logins[0].allHeaders()).authorization ?? "",
                 new RegExp(`^GPUPOOL-HMAC-SHA256 Credential=${member.accessKey}, Timestamp=\\d+, ` +
                            "Nonce=[A-Za-z0-9._~-]{16,128}, Signature=[0-9a-f]{64}$"));
    for (const r of sent) {
      const everything = r.url() + JSON.stringify(await r.allHeaders()) + (r.postData() ?? "");
      assert.ok(!everything.includes(member.secretKey),
                `the secret key was sent in ${r.method()} ${r.url()}`);
    }
  });

  step("a wrong secret key is refused with the server's reason", async (page, context) => {
    await page.goto("/login");
    await page.getByTestId("login-access-key").fill(member.accessKey);
    await page.getByTestId("login-secret-key").fill("A".repeat(40));
    await page.getByTestId("login-submit").click();
    await page.getByTestId("login-error").filter({ hasText: "signature does not match" }).waitFor();
    assert.equal((await context.cookies()).some((c) => c.name === "gpupool_session"), false);
    assert.equal(await page.getByTestId("page-overview").count(), 0);
  });

  step("an unknown access key is named beside its field", async (page) => {
    await page.goto("/login");
    await page.getByTestId("login-access-key").fill("AKNOSUCHKEY0000000");
    await page.getByTestId("login-secret-key").fill(member.secretKey);
    await page.getByTestId("login-submit").click();
    await page.getByTestId("login-access-key-error").filter({ hasText: "AKNOSUCHKEY0000000" })
      .waitFor();
  });

  step("logs in with the keyboard alone", async (page) => {
    await page.goto("/login");
    await page.getByTestId("login-access-key").focus();
    await page.keyboard.type(member.accessKey);
    await page.keyboard.press("Tab");
    await page.keyboard.type(member.secretKey);
    await page.keyboard.press("Enter");
    await page.getByTestId("page-overview").waitFor();
  });

  step("works in a narrow window: the navigation behind its menu button", async (page) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await login(page, member);
    const nav = page.getByTestId("nav");
    assert.equal(await nav.isVisible(), false, "the navigation is folded away");
    await page.getByTestId("nav-toggle").click();
    await page.getByTestId("nav-tasks").click();
    await page.getByTestId("page-tasks").waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth -
                                                document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than the window`);
  });

  step("a state-changing request without the CSRF token is refused", async (page) => {
    await login(page, member);
    const task = { project: member.project, command: ["true"], hold: true };
    const missing = await pageFetch(page, "POST", "/v1/tasks", { body: task });
    assert.equal(missing.status, 403, missing.text);
    assert.equal(missing.body.error.code, "permission_denied");
    assert.match(missing.body.error.message, /X-CSRF-Token/);
    const wrong = await pageFetch(page, "POST", "/v1/tasks",
                                  { body: task, headers: { "X-CSRF-Token": "not-the-token" } });
    assert.equal(wrong.status, 403, wrong.text);
    assert.equal((await suite.pool.api.ok("GET", `/v1/tasks?project=${member.project}`)).tasks.length, 0,
                 "a refused request changes nothing");

    // The same request with the session's token (which a reloaded page reads back) is accepted:
    // the refusals above were for the header alone.
    const current = await pageFetch(page, "GET", "/v1/console/sessions/current");
    assert.equal(current.status, 200, current.text);
    const accepted = await pageFetch(page, "POST", "/v1/tasks",
      { body: task, headers: { "X-CSRF-Token": current.body.csrf_token } });
    assert.equal(accepted.status, 201, accepted.text);
    assert.equal(accepted.body.user, member.user, "the session acts as its key's user");
  });

  step("a reload keeps the session", async (page) => {
    await login(page, member);
    await page.reload();
    await page.getByTestId("page-overview").waitFor();
    assert.equal(await page.getByTestId("login-form").count(), 0);
  });

  step("a session dies with its key", async (page) => {
    const key = await suite.pool.api.ok("POST", `/v1/users/${member.user}/keys`,
                                        { description: "revoked by the test" });
    await login(page, { accessKey: key.access_key, secretKey: key.secret_key });
    // Off the app (a page of the same origin without it), so that the request below is the
    // session's first after the revocation: that one is told why (later ones: the session is
    // unknown, the server having dropped it).
    await page.goto("/healthz");
    await suite.pool.api.ok("DELETE", `/v1/keys/${key.access_key}`);
    const first = await pageFetch(page, "GET", "/v1/tasks");
    assert.equal(first.status, 401, first.text);
    assert.match(first.body.error.message, new RegExp(`${key.access_key} was revoked`));
    const next = await pageFetch(page, "GET", "/v1/tasks");
    assert.equal(next.status, 401, next.text);
    await page.goto("/tasks");  // the app's first call is refused: log in again
    await page.getByTestId("login-form").waitFor();
  });

  step("logout ends the session on the server", async (page, context) => {
    await login(page, member);
    const cookie = (await context.cookies()).find((c) => c.name === "gpupool_session");
    await logout(page);
    assert.equal((await context.cookies()).some((c) => c.name === "gpupool_session"), false,
                 "logout clears the cookie");
    assert.equal((await pageFetch(page, "GET", "/v1/console/sessions/current")).status, 401);
    // The old cookie, replayed, is dead: the server forgot the session, not just the browser.
    await context.addCookies([cookie]);
    const replayed = await pageFetch(page, "GET", "/v1/tasks");
    assert.equal(replayed.status, 401, replayed.text);
    assert.equal(replayed.body.error.code, "unauthenticated");
    await page.goto("/tasks");
    await page.getByTestId("login-form").waitFor();
  });
});
