// console_e2e.Volumes: a member's volumes in the console, in a real Chromium against a real
// `gpupool up`: a volume created from the volumes page (a name the server would refuse is named
// beside its field first, and nothing is sent), listed with its size, kind and place, resized in
// place, mounted by a task made with the create-task form (the task's record carries the mount),
// its deletion refused while that task has not ended (the server's message beside the button),
// then deleted once the task is stopped. The steps share one page, in order.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { login } from "./console.mjs";
import { createMember, timeouts, useSuite } from "./harness.mjs";

const GiB = 2 ** 30;
const volumeName = "train-data";
const row = `[data-testid="volume-row"][data-name="${volumeName}"]`;

describe("Volumes", () => {
  let pool;
  let member;
  let session;
  let taskId;
  useSuite("volumes", { setUp: async (suite) => {
    pool = suite.pool;
    member = await createMember(pool.api, { project: "p-data", user: "u-vera" });
    session = await suite.openSession();
    await login(session.page, member);
  } });
  const step = (name, body) => it(name, () => session.step(name, body));
  const serverVolumes = async () =>
    (await pool.api.ok("GET", "/v1/volumes?project=p-data")).volumes;

  step("creates a volume from the form, a bad name refused beside its field", async (page) => {
    await page.getByTestId("nav-volumes").click();
    await page.getByTestId("page-volumes").waitFor();
    await page.getByTestId("volumes").getByTestId("empty").waitFor();
    await page.getByTestId("volume-new-name").fill("Train Data");
    await page.getByTestId("volume-new-size").fill("2");
    await page.getByTestId("volume-new-submit").click();
    await page.getByTestId("volume-new-name-error")
      .filter({ hasText: "must start with a lower-case letter or a digit" }).waitFor();
    assert.deepEqual(await serverVolumes(), [], "nothing was sent");

    await page.getByTestId("volume-new-name").fill(volumeName);
    await page.getByTestId("volume-new-unit").selectOption("GiB");
    await page.getByTestId("volume-new-submit").click();
    const listed = page.locator(row);
    await listed.waitFor();
    assert.equal(await listed.getByTestId("volume-size").textContent(), "2.0 GiB");
    assert.equal(await listed.getByTestId("volume-kind").textContent(), "node-local");
    assert.equal(await listed.getByTestId("volume-where").textContent(), "its first task's node");
    assert.equal(await listed.getByTestId("volume-state").getAttribute("data-state"), "ready");
    const [v] = await serverVolumes();
    assert.deepEqual([v.name, v.size_bytes, v.shared, v.node, v.created_by],
                     [volumeName, 2 * GiB, false, "", "u-vera"]);
    assert.equal(await listed.getAttribute("data-volume"), v.id);
  });

  step("resizes it in place", async (page) => {
    const listed = page.locator(row);
    await listed.getByTestId("volume-resize").click();
    await listed.getByTestId("volume-resize-size").fill("3");
    await listed.getByTestId("volume-resize-save").click();
    await listed.getByTestId("volume-size").filter({ hasText: "3.0 GiB" }).waitFor();
    assert.equal((await serverVolumes())[0].size_bytes, 3 * GiB);
  });

  step("mounts it in a task created from the form", async (page) => {
    await page.getByTestId("nav-create-task").click();
    await page.getByTestId("create-command").fill("true");
    await page.getByTestId("create-hold").check();
    await page.getByTestId("create-volume-add").click();
    const mount = page.getByTestId("create-volume-row");
    await mount.getByTestId("create-volume-select").locator(`option[value="${volumeName}"]`)
      .waitFor({ state: "attached" });
    await mount.getByTestId("create-volume-select").selectOption(volumeName);
    assert.equal(await mount.getByTestId("create-volume-path").inputValue(), `/root/${volumeName}`,
                 "the path defaults to /root/<name>");
    await mount.getByTestId("create-volume-path").fill("/root");
    await page.getByTestId("create-submit").click();
    await page.getByTestId("create-volumes-error")
      .filter({ hasText: "is the task's whole workspace /root" }).waitFor();
    await mount.getByTestId("create-volume-path").fill("/root/data");
    await mount.getByTestId("create-volume-ro").check();
    await page.getByTestId("create-submit").click();
    // The task's page, once its URL names the task (the page shows before its data has come).
    await page.waitForURL(/\/tasks\/t-\d+$/, { timeout: timeouts.task });
    taskId = new URL(page.url()).pathname.split("/").pop();
    await page.locator(`[data-testid="page-task"][data-task="${taskId}"]`).waitFor();
    await page.getByTestId("task-facts").filter({ hasText: `${volumeName} at /root/data (read-only)` })
      .waitFor();
    const task = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    const [v] = await serverVolumes();
    assert.deepEqual(task.volumes, [{ volume: volumeName, path: "/root/data", read_only: true,
                                      volume_id: v.id, shared: false }]);
  });

  step("refuses to delete it while the task mounts it, saying why", async (page) => {
    assert.ok(taskId, "no task: the step that creates it failed");
    await page.getByTestId("nav-volumes").click();
    const listed = page.locator(row);
    await listed.getByTestId("volume-used-by").filter({ hasText: taskId }).waitFor();
    const asked = new Promise((answer) => page.once("dialog", (d) => {
      answer(d.message());
      d.accept();
    }));
    await listed.getByTestId("volume-delete").click();
    assert.match(await asked, new RegExp(`^Delete the volume ${volumeName} \\(v-\\d+\\)\\?`));
    await listed.getByTestId("volume-delete-error")
      .filter({ hasText: `is mounted by ${taskId}, which have not ended` }).waitFor();
    assert.equal((await serverVolumes()).length, 1, "still there");
  });

  step("deletes it once no live task mounts it", async (page) => {
    await pool.api.ok("POST", `/v1/tasks/${taskId}/stop`);
    await page.getByTestId("volumes-refresh").click();
    const listed = page.locator(row);
    await listed.getByTestId("volume-used-by").filter({ hasText: /^-$/ }).waitFor();
    page.once("dialog", (d) => d.accept());
    await listed.getByTestId("volume-delete").click();
    await page.getByTestId("volumes").getByTestId("empty").waitFor();
    assert.deepEqual(await serverVolumes(), []);
  });
});
