// console_e2e.Admin: what an admin does in the console, in a real Chromium against a real
// `gpupool up` — cordons and uncordons the node from the nodes page (the server's node changes,
// and so does the page, without a reload), and adds credit to a project from the billing page
// (the server's balance grows by exactly that amount, and the page shows it), and creates a
// project with a storage quota and then lifts it (the server's project follows; a size the form
// cannot read is refused under its field and sends nothing).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { login } from "./console.mjs";
import { useSuite } from "./harness.mjs";

const node = "e2e";

describe("Admin", () => {
  let session;
  let pool;
  useSuite("admin", { pool: { node }, setUp: async (suite) => {
    pool = suite.pool;
    session = await suite.openSession();
    await login(session.page, pool.admin);
  } });
  const step = (name, body) => it(name, () => session.step(name, body));

  step("cordons and uncordons the node from the nodes page", async (page) => {
    await page.getByTestId("nav-nodes").click();
    const card = page.getByTestId(`node-${node}`);
    await page.locator(`[data-testid="node-${node}"][data-status="ready"][data-cordoned="false"]`)
      .waitFor();
    await card.getByTestId("node-cordon").click();
    await page.locator(`[data-testid="node-${node}"][data-cordoned="true"]`).waitFor();
    assert.equal((await pool.api.ok("GET", `/v1/nodes/${node}`)).cordoned, true);
    await card.getByTestId("node-uncordon").click();
    await page.locator(`[data-testid="node-${node}"][data-cordoned="false"]`).waitFor();
    assert.equal((await pool.api.ok("GET", `/v1/nodes/${node}`)).cordoned, false);
  });

  step("adds credit to a project from the billing page", async (page) => {
    const before = await pool.api.ok("GET", "/v1/projects/default/balance");
    await page.getByTestId("nav-billing").click();
    await page.getByTestId("page-billing").waitFor();
    await page.getByTestId("credit-amount").fill("12.5");
    await page.getByTestId("credit-submit").click();
    await page.getByTestId("balance")
      .filter({ hasText: ((before.balance_micros + 12_500_000) / 1e6).toFixed(6) }).waitFor();
    const after = await pool.api.ok("GET", "/v1/projects/default/balance");
    assert.equal(after.credits_micros - before.credits_micros, 12_500_000);
  });

  step("creates a project with a storage quota, then lifts it", async (page) => {
    await page.getByTestId("nav-admin").click();
    await page.getByTestId("admin-projects").waitFor();
    await page.getByTestId("project-id").fill("p-storage");
    await page.getByTestId("project-new-max-storage").fill("fifty");
    await page.getByTestId("project-new-submit").click();
    await page.getByTestId("project-new-max-storage-error").filter({ hasText: "invalid size" })
      .waitFor();
    assert.equal((await pool.api.call("GET", "/v1/projects/p-storage")).status, 404);

    await page.getByTestId("project-new-max-storage").fill("50G");
    await page.getByTestId("project-new-submit").click();
    const row = page.locator('[data-testid="project-row"][data-project="p-storage"]');
    await row.getByTestId("project-max-storage").filter({ hasText: "50Gi" }).waitFor();
    assert.equal((await pool.api.ok("GET", "/v1/projects/p-storage")).max_storage_bytes,
      50 * 2 ** 30);

    await row.getByTestId("project-edit").click();
    await page.getByTestId("project-p-storage-max-storage").fill("");
    await page.getByTestId("project-p-storage-submit").click();
    await row.getByTestId("project-max-storage").filter({ hasText: "unlimited" }).waitFor();
    assert.equal((await pool.api.ok("GET", "/v1/projects/p-storage")).max_storage_bytes, -1);
  });
});
