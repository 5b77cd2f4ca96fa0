// console_e2e.Datasets: a member's datasets in the console, in a real Chromium against a real
// `gpupool up`: an empty dataset (created through the API) listed with no version and deleted from
// the page; a dataset pushed twice with the CLI (`gpupool dataset push`) listed with its latest
// version, its versions opened in place; its first version mounted read-only by a task made with
// the create-task form (a mount at /root itself refused under the field; the task's page and
// record name the version); that version's deletion refused while the task has not ended, then
// deleted once it has; an admin publishes it to every project and takes it back, then deletes it.
// The steps share one page, in order.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";

import { login, logout } from "./console.mjs";
import { createMember, runCli, timeouts, useSuite } from "./harness.mjs";

const name = "train-set";
const dataset = (n) => `[data-testid="dataset"][data-name="${n}"]`;

describe("Datasets", () => {
  let pool;
  let member;
  let session;
  let taskId;
  let dir;
  useSuite("datasets", { setUp: async (suite) => {
    pool = suite.pool;
    member = await createMember(pool.api, { project: "p-ds", user: "u-dana" });
    session = await suite.openSession();
    await login(session.page, member);
    dir = mkdtempSync(join(tmpdir(), "console-datasets-"));
  } });
  const step = (title, body) => it(title, () => session.step(title, body));
  const serverDatasets = async () =>
    (await pool.api.ok("GET", "/v1/datasets?project=p-ds")).datasets;
  // One push of the directory holding a.txt = `text`: the dataset's next version.
  const push = async (text) => {
    writeFileSync(join(dir, "a.txt"), text);
    await runCli(pool, member, ["dataset", "push", dir, name], dir);
  };

  step("lists an empty dataset with no version and deletes it", async (page) => {
    const empty = await pool.api.ok("POST", "/v1/datasets",
                                    { name: "empty-set", project: "p-ds" });
    await page.getByTestId("nav-datasets").click();
    await page.getByTestId("page-datasets").waitFor();
    const listed = page.locator(dataset("empty-set"));
    await listed.waitFor();
    assert.equal(await listed.getAttribute("data-dataset"), empty.id);
    assert.equal(await listed.getByTestId("dataset-latest").textContent(), "none yet");
    assert.equal(await listed.getByTestId("dataset-published").textContent(), "no");
    assert.equal(await listed.getByTestId("dataset-publish").count(), 0,
                 "a member does not publish");
    await listed.getByTestId("dataset-versions-toggle").click();
    await listed.getByTestId("dataset-no-version")
      .filter({ hasText: "gpupool dataset push DIR empty-set" }).waitFor();
    const asked = new Promise((answer) => page.once("dialog", (d) => {
      answer(d.message());
      d.accept();
    }));
    await listed.getByTestId("dataset-delete").click();
    assert.match(await asked,
                 new RegExp(`^Delete the dataset empty-set \\(${empty.id}\\) with its 0 version`));
    await page.getByTestId("datasets").getByTestId("empty").waitFor();
    assert.deepEqual(await serverDatasets(), []);
  });

  step("lists a dataset pushed twice with its latest version and its versions", async (page) => {
    await push("one\n");
    await push("two, longer\n");
    await page.getByTestId("datasets-refresh").click();
    const listed = page.locator(dataset(name));
    await listed.getByTestId("dataset-latest").filter({ hasText: "v2" }).waitFor();
    assert.equal(await listed.getByTestId("dataset-files").textContent(), "1");
    assert.equal(await listed.getByTestId("dataset-size").textContent(), "12 B");
    await listed.getByTestId("dataset-versions-toggle").click();
    const versions = listed.getByTestId("dataset-version-row");
    await versions.nth(1).waitFor();
    assert.deepEqual(await versions.evaluateAll((rows) => rows.map((r) => r.dataset.version)),
                     ["1", "2"]);
    const [d] = await serverDatasets();
    assert.deepEqual(d.versions.map((v) => [v.version, v.files, v.bytes, v.created_by]),
                     [[1, 1, 4, "u-dana"], [2, 1, 12, "u-dana"]]);
  });

  step("mounts its first version read-only in a task created from the form", async (page) => {
    await page.getByTestId("nav-create-task").click();
    await page.getByTestId("create-command").fill("cat /root/data/a.txt");
    await page.getByTestId("create-hold").check();
    await page.getByTestId("create-dataset-add").click();
    const mount = page.getByTestId("create-dataset-row");
    await mount.getByTestId("create-dataset-select").locator(`option[value="${name}"]`)
      .waitFor({ state: "attached" });
    await mount.getByTestId("create-dataset-select").selectOption(name);
    assert.equal(await mount.getByTestId("create-dataset-path").inputValue(), `/root/${name}`,
                 "the path defaults to /root/<name>");
    await mount.getByTestId("create-dataset-version").selectOption("1");
    await mount.getByTestId("create-dataset-path").fill("/root");
    await page.getByTestId("create-submit").click();
    await page.getByTestId("create-datasets-error")
      .filter({ hasText: "is the task's whole workspace /root" }).waitFor();
    await mount.getByTestId("create-dataset-path").fill("/root/data");
    await page.getByTestId("create-submit").click();
    await page.waitForURL(/\/tasks\/t-\d+$/, { timeout: timeouts.task });
    taskId = new URL(page.url()).pathname.split("/").pop();
    await page.locator(`[data-testid="page-task"][data-task="${taskId}"]`).waitFor();
    await page.getByTestId("task-facts").filter({ hasText: `${name}@1 at /root/data (read-only)` })
      .waitFor();
    const task = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    const [d] = await serverDatasets();
    assert.deepEqual(task.datasets, [{ dataset: name, version: 1, path: "/root/data",
                                       dataset_id: d.id, project: "p-ds",
                                       manifest: d.versions[0].manifest }]);
  });

  step("refuses to delete the version the task mounts, deletes it once the task ended",
       async (page) => {
    assert.ok(taskId, "no task: the step that creates it failed");
    await page.getByTestId("nav-datasets").click();
    const listed = page.locator(dataset(name));
    await listed.getByTestId("dataset-used-by").filter({ hasText: taskId }).waitFor();
    await listed.getByTestId("dataset-versions-toggle").click();
    const first = listed.locator('[data-testid="dataset-version-row"][data-version="1"]');
    page.once("dialog", (d) => d.accept());
    await first.getByTestId("dataset-version-delete").click();
    await first.getByTestId("dataset-version-delete-error").waitFor();
    assert.equal((await serverDatasets())[0].versions.length, 2, "still there");

    await pool.api.ok("POST", `/v1/tasks/${taskId}/stop`);
    await page.getByTestId("datasets-refresh").click();
    await listed.getByTestId("dataset-used-by").filter({ hasText: /^-$/ }).waitFor();
    // Its versions stay open across the list's reload.
    const asked = new Promise((answer) => page.once("dialog", (d) => {
      answer(d.message());
      d.accept();
    }));
    await first.getByTestId("dataset-version-delete").click();
    assert.match(await asked, new RegExp(`^Delete version 1 of the dataset ${name} `));
    await first.waitFor({ state: "detached" });
    assert.deepEqual((await serverDatasets())[0].versions.map((v) => v.version), [2]);
    assert.equal(await listed.getByTestId("dataset-latest").textContent(), "v2");
  });

  step("an admin publishes it to every project, takes it back and deletes it", async (page) => {
    await logout(page);
    await login(page, pool.admin);
    await page.getByTestId("nav-datasets").click();
    const listed = page.locator(dataset(name));
    await listed.getByTestId("dataset-publish").filter({ hasText: "Publish" }).click();
    await listed.getByTestId("dataset-published").filter({ hasText: "every project" }).waitFor();
    assert.equal((await serverDatasets())[0].published, true);
    await listed.getByTestId("dataset-publish").filter({ hasText: "Unpublish" }).click();
    await listed.getByTestId("dataset-published").filter({ hasText: /^no$/ }).waitFor();
    assert.equal((await serverDatasets())[0].published, false);
    page.once("dialog", (d) => d.accept());
    await listed.getByTestId("dataset-delete").click();
    await page.getByTestId("datasets").getByTestId("empty").waitFor();
    assert.deepEqual(await serverDatasets(), []);
    rmSync(dir, { recursive: true });
  });
});
