// console_e2e.Tenancy: a member's session sees exactly what the member's key may see — in a real
// Chromium against a real `gpupool up` with two projects, each with a member: another project's
// task is absent from the task list, not found by its URL (the page and every API call behind
// it: 404, as for a task that does not exist), cannot be stopped, and never appears on the
// member's live event stream; and the member's navigation offers no admin pages.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { login, pageFetch } from "./console.mjs";
import { ApiClient, createMember, useSuite } from "./harness.mjs";

const held = (name) => ({ name, command: ["/bin/sh", "-c", "echo hi"], hold: true });

describe("Tenancy", () => {
  let session;
  let alpha;   // the member logged in in the browser
  let beta;    // the other project's member, through the REST API
  let betaApi;
  let alphaApi;
  let alphaTask;
  let betaTask;
  useSuite("tenancy", { setUp: async (suite) => {
    const { pool } = suite;
    alpha = await createMember(pool.api, { project: "p-alpha", user: "u-alpha" });
    beta = await createMember(pool.api, { project: "p-beta", user: "u-beta" });
    alphaApi = new ApiClient(pool.url, alpha.accessKey, alpha.secretKey);
    betaApi = new ApiClient(pool.url, beta.accessKey, beta.secretKey);
    alphaTask = await alphaApi.ok("POST", "/v1/tasks", held("alpha-own"));
    betaTask = await betaApi.ok("POST", "/v1/tasks", held("beta-secret"));
    session = await suite.openSession();
    await login(session.page, alpha);
  } });
  const step = (name, body) => it(name, () => session.step(name, body));

  step("the task list shows the member's task and not another project's", async (page) => {
    await page.goto("/tasks");
    await page.locator(`[data-testid="task-row"][data-task="${alphaTask.id}"]`).waitFor();
    assert.equal(await page.locator(`[data-testid="task-row"][data-task="${betaTask.id}"]`)
                   .count(), 0);
    assert.equal(await page.getByText("beta-secret").count(), 0);
    const listed = await pageFetch(page, "GET", "/v1/tasks?limit=1000");
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.tasks.map((t) => t.id), [alphaTask.id]);
  });

  step("a member's navigation has no admin pages", async (page) => {
    await page.getByTestId("nav-tasks").waitFor();
    assert.equal(await page.getByTestId("nav-nodes").count(), 0);
    assert.equal(await page.getByTestId("nav-admin").count(), 0);
  });

  step("another project's task is not found by its URL", async (page) => {
    await page.goto(`/tasks/${betaTask.id}`);
    await page.getByTestId("task-not-found").filter({ hasText: betaTask.id }).waitFor();
    assert.equal(await page.getByText("beta-secret").count(), 0);
    // Every API call behind the task page answers as for a task that does not exist.
    const missing = `/v1/tasks/t-999999`;
    for (const suffix of ["", "/events", "/logs", "/metrics", "/files", "/cost"]) {
      const theirs = await pageFetch(page, "GET", `/v1/tasks/${betaTask.id}${suffix}`);
      const nobody = await pageFetch(page, "GET", `${missing}${suffix}`);
      assert.equal(theirs.status, 404, `GET …${suffix}: ${theirs.text}`);
      assert.equal(nobody.status, 404, `GET …${suffix} of a task that does not exist`);
      assert.equal(theirs.body.error.code, "not_found");
    }
  });

  step("another project's task cannot be stopped from the member's session", async (page) => {
    const current = await pageFetch(page, "GET", "/v1/console/sessions/current");
    const stop = await pageFetch(page, "POST", `/v1/tasks/${betaTask.id}/stop`,
                                 { headers: { "X-CSRF-Token": current.body.csrf_token } });
    assert.equal(stop.status, 404, stop.text);
    assert.equal((await betaApi.ok("GET", `/v1/tasks/${betaTask.id}`)).state, "pending");
  });

  step("the live event stream carries only the member's projects' tasks", async (page) => {
    // The member's own EventSource, as the app opens it (same origin, the session's cookie).
    await page.evaluate(() => new Promise((ready, fail) => {
      window.__e2eEvents = [];
      const es = new EventSource("/v1/events");
      window.__e2eStream = es;
      es.addEventListener("hello", () => ready());
      es.addEventListener("task", (e) => window.__e2eEvents.push(JSON.parse(e.data)));
      es.onerror = () => fail(new Error("the event stream failed"));
    }));
    // The other project's task first, then the member's: one stream delivers in order, so once
    // the member's task has arrived, the other's would have arrived before it.
    const theirs = await betaApi.ok("POST", "/v1/tasks", held("beta-second"));
    const ours = await alphaApi.ok("POST", "/v1/tasks", held("alpha-second"));
    await page.waitForFunction((id) => window.__e2eEvents.some((t) => t.id === id), ours.id);
    const seen = await page.evaluate(() => {
      window.__e2eStream.close();
      return window.__e2eEvents.map((t) => `${t.id} ${t.project}`);
    });
    assert.ok(!seen.some((s) => s.startsWith(`${theirs.id} `)),
              `the member saw the other project's task: ${seen.join(", ")}`);
    assert.ok(seen.every((s) => s.endsWith(` ${alpha.project}`)), seen.join(", "));
    // Nor can the member watch the other project's task by name.
    const watch = await page.evaluate(async (id) => {
      const ac = new AbortController();
      const r = await fetch(`/v1/events?task=${id}`, { signal: ac.signal });
      ac.abort();
      return r.status;
    }, betaTask.id);
    assert.equal(watch, 404);
  });
});
