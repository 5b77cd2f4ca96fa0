// console_e2e.Tasks: one task's life in the console, as a member lives it, in a real Chromium
// against a real `gpupool up` with simulated GPUs: a refused form (the server's 400 beside the
// field it names), then created from the form with an input file, pending (the node is
// cordoned, and the page says so) then running once the node is uncordoned — seen live, without
// a reload — on the overview with its GPU busy, its GPU chart receiving new points, the chart of
// the metric it reports, its log lines arriving, its workspace listed and a file uploaded into it
// while it runs, how to SSH into it with a key added and removed on the SSH keys page, another
// task's port opened from its page (the server's signed link, then the app through the gateway),
// snapshotted and stopped from its page (its snapshots listed, newest first, as they are taken),
// its output (made from the input) downloaded, resumed from the stop's snapshot, then from the
// first snapshot by its row of the list, and that snapshot deleted from the list. The steps share
// one page, in order; each names what it checks.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import { describe, it } from "node:test";

import { login, waitForTaskState } from "./console.mjs";
import { createMember, eventually, timeouts, useSuite } from "./harness.mjs";

const node = "e2e";
// An SSH public key (made with ssh-keygen; its fingerprint is SHA256:k8flRrTg…).
const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO1FzrfO07qkSSTT6fTpOmTzTBmX7XUZITTGMy62m4lS";

// A TCP port free now (the task binds it a moment later).
const freePort = () => new Promise((answer) => {
  const server = createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address();
    server.close(() => answer(port));
  });
});
const input = Buffer.from("hello from the browser\n");
// The task: its output file is its input in capitals; then a log line and a metric line
// (server/metric_line.h: one JSON object per line in $GPUPOOL_METRICS_FILE) every second until
// it is stopped. Typed into the form's command field as words (no single quote inside).
const script = "tr a-z A-Z < input.txt > result.txt; i=0; while true; do i=$((i+1)); " +
  'echo "epoch $i"; ' +
  'echo "{\\"step\\": $i, \\"loss\\": $(awk -v i=$i "BEGIN{printf \\"%.4f\\", 2/(i+1)}")}" ' +
  '>> "$GPUPOOL_METRICS_FILE"; sleep 1; done';
const commandLine = `/bin/sh -c '${script}'`;

// The element of chart `testid` that says how many points it plots (TESTIDS.md: data-points,
// which Chart.tsx keeps on its plot inside the chart's element).
const pointsOf = (testid) =>
  `[data-testid="${testid}"][data-points], [data-testid="${testid}"] [data-points]`;

// Waits until the chart `testid` plots more than `n` points; answers how many it plots then.
async function waitForMorePoints(page, testid, n, timeout = timeouts.task) {
  const handle = await page.waitForFunction(([selector, count]) => {
    const el = document.querySelector(selector);
    const points = el === null ? -1 : Number(el.getAttribute("data-points"));
    return points > count ? points : false;
  }, [pointsOf(testid), n], { timeout });
  return handle.jsonValue();
}

describe("Tasks", () => {
  let pool;
  let alice;
  let session;
  let taskId;
  let manualSnapshot;  // the snapshot taken with the page's Snapshot button
  let stopSnapshot;    // the one the stop took
  useSuite("tasks", { pool: { node }, setUp: async (suite) => {
    pool = suite.pool;
    alice = await createMember(pool.api, { project: "p-train", user: "u-alice" });
    session = await suite.openSession();
    await login(session.page, alice);
  } });
  const step = (name, body) => it(name, () => session.step(name, body));
  // The steps after the first follow the task it created.
  const stepOnTask = (name, body) => step(name, async (page) => {
    assert.ok(taskId, "no task: the step that creates it failed");
    await body(page);
  });

  step("shows the server's refusal beside the field it names", async (page) => {
    await page.getByTestId("nav-tasks").click();
    await page.getByTestId("tasks-new").click();
    await page.getByTestId("create-name").fill("e2e-refused");
    await page.getByTestId("create-command").fill("true");
    await page.getByTestId("create-gpu-form-mig").check();
    await page.getByTestId("create-mig").fill("9g.90gb");  // well formed, but no GPU has it
    await page.getByTestId("create-submit").click();
    await page.getByTestId("create-mig-error")
      .filter({ hasText: "mig_profile '9g.90gb' is not a MIG profile" }).waitFor();
    assert.equal(new URL(page.url()).pathname, "/tasks/new", "the form stays, with its values");
    assert.equal(await page.getByTestId("create-mig").inputValue(), "9g.90gb");
    assert.deepEqual((await pool.api.ok("GET", `/v1/tasks?project=${alice.project}`)).tasks, []);
  });

  step("creates a task from the form with an input file", async (page) => {
    // The node is cordoned first, so that the task waits (pending) until the test uncordons it.
    await pool.api.ok("POST", `/v1/nodes/${node}/cordon`);
    await page.getByTestId("nav-tasks").click();
    await page.getByTestId("tasks-new").click();
    await page.getByTestId("page-create-task").waitFor();
    await page.getByTestId("create-name").fill("e2e-train");
    await page.getByTestId("create-command").fill(commandLine);
    await page.getByTestId("create-gpu-form-whole").check();
    await page.getByTestId("create-gpus").fill("1");
    await page.getByTestId("create-input-files").setInputFiles(
      { name: "input.txt", mimeType: "text/plain", buffer: input });
    await page.getByTestId("create-input-list").filter({ hasText: "input.txt" }).waitFor();
    await page.getByTestId("create-submit").click();
    await page.waitForURL(/\/tasks\/t-\d+$/, { timeout: timeouts.task });
    taskId = new URL(page.url()).pathname.split("/").pop();

    const task = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    assert.equal(task.name, "e2e-train");
    assert.equal(task.project, alice.project);
    assert.equal(task.user, alice.user);
    assert.equal(task.gpu_count, 1);
    assert.deepEqual(task.command, ["/bin/sh", "-c", script]);
    const files = await pool.api.ok("GET", `/v1/tasks/${taskId}/files`);
    assert.deepEqual(files.files.map((f) => [f.path, f.size, f.sha256]),
                     [["input.txt", input.length, createHash("sha256").update(input).digest("hex")]],
                     "the input was uploaded before the task was released");
  });

  stepOnTask("shows it pending with the scheduler's reason, then running, live", async (page) => {
    await waitForTaskState(page, "pending");
    const server = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    assert.equal(server.held, false, "released once its input was uploaded");
    assert.match(server.pending_reason, /cordon/);
    await page.getByTestId("task-pending-reason").filter({ hasText: server.pending_reason })
      .waitFor();
    // A marker in the page's memory: if the page reloaded to learn the new state, it is gone.
    await page.evaluate(() => { window.__e2eSamePage = true; });
    await pool.api.ok("POST", `/v1/nodes/${node}/uncordon`);
    await waitForTaskState(page, "running");
    assert.equal(await page.evaluate(() => window.__e2eSamePage), true,
                 "the state arrived over the live stream, not by reloading the page");
  });

  stepOnTask("the overview lists it among the member's running tasks, its GPU busy",
             async (page) => {
    const { placement } = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    await page.getByTestId("nav-overview").click();
    const link = page.getByTestId("my-running").getByRole("link", { name: taskId });
    await link.waitFor();
    // The simulated GPU the task holds reports its load (heat map: data-util, in %).
    await page.waitForFunction((selector) => Number(document.querySelector(selector)
      ?.getAttribute("data-util")) > 0, `[data-testid="heat-gpu-${node}-${placement.gpus[0]}"]`);
    await link.click();
    await page.locator(`[data-testid="page-task"][data-task="${taskId}"]`).waitFor();
  });

  stepOnTask("charts its GPU utilisation as new points arrive", async (page) => {
    const first = await waitForMorePoints(page, "chart-gpu-util", 0);
    await waitForMorePoints(page, "chart-gpu-util", first);
    await waitForMorePoints(page, "chart-gpu-mem", 0);
  });

  stepOnTask("charts the metric the task reports", async (page) => {
    await waitForMorePoints(page, "chart-metric-loss", 1);
    const latest = await pool.api.ok("GET", `/v1/tasks/${taskId}/metrics`);
    assert.ok(latest.reported.length >= 2, JSON.stringify(latest.reported));
    // The latest values follow the metrics as they arrive: the step shown moves on, and the
    // built-ins (which no event updates, so they would stand still) are not among them.
    const facts = page.getByTestId("metrics-latest");
    const step = Number(await facts.locator('[data-metric="step"]').textContent());
    await page.waitForFunction(
      (before) => Number(document.querySelector('[data-testid="metrics-latest"] [data-metric="step"]')?.textContent) > before,
      step, { timeout: timeouts.task });
    assert.equal(await facts.locator('[data-metric="loss"]').count(), 1);
    assert.equal(await facts.locator('[data-metric="runtime_s"]').count(), 0);
  });

  stepOnTask("shows its log lines as they arrive", async (page) => {
    const log = page.getByTestId("log-lines");
    await log.filter({ hasText: "epoch 1" }).waitFor({ timeout: timeouts.task });
    const shown = (await log.textContent()).match(/epoch (\d+)/g).length;
    await log.filter({ hasText: `epoch ${shown + 1}` }).waitFor({ timeout: timeouts.task });
  });

  stepOnTask("lists its workspace while it runs and uploads a file into it", async (page) => {
    // result.txt is on the node (the task wrote it); the listing is its workspace's.
    await page.getByTestId("files-refresh").click();
    await page.locator('[data-testid="file-row"][data-path="result.txt"]').waitFor();
    const live = Buffer.from("put in while it runs\n");
    await page.getByTestId("files-upload-input").setInputFiles(
      { name: "live.txt", mimeType: "text/plain", buffer: live });
    await page.locator('[data-testid="file-row"][data-path="live.txt"]').waitFor();
    const listed = await pool.api.ok("GET", `/v1/tasks/${taskId}/files?path=live.txt`);
    assert.deepEqual(listed.files.map((f) => [f.path, f.size, f.sha256]),
                     [["live.txt", live.length, createHash("sha256").update(live).digest("hex")]],
                     "the running task's workspace has the file");
  });

  stepOnTask("offers SSH and the shell while it runs, and takes the key SSH needs", async (page) => {
    const connect = page.getByTestId("task-connect");
    await connect.waitFor();
    assert.equal(await page.getByTestId("task-ssh-command").textContent(), `ssh ${taskId}.gpupool`);
    await connect.getByRole("link", { name: "SSH keys" }).click();
    await page.getByTestId("page-ssh-keys").waitFor();
    await page.getByTestId("ssh-keys").getByTestId("empty").waitFor();
    // A private key pasted by mistake: the server's refusal, on its field.
    await page.getByTestId("ssh-key-public-input").fill("-----BEGIN OPENSSH PRIVATE KEY----- b3Bl");
    await page.getByTestId("ssh-key-add").click();
    assert.match(await page.getByTestId("ssh-key-public-error").textContent(),
                 /is a private key: give the public one/);
    await page.getByTestId("ssh-key-public-input").fill(`${sshKey} alice@laptop\n`);
    await page.getByTestId("ssh-key-add").click();
    const row = page.locator('[data-testid="ssh-key-row"][data-name="alice-laptop"]');
    await row.waitFor();
    assert.match(await row.textContent(), /SHA256:k8flRrTgclSVM4w8vzimHe\+94OexcAdZ9KhIQt8NVjI/);
    const { keys } = await pool.api.ok("GET", `/v1/users/${alice.user}/ssh-keys`);
    assert.deepEqual(keys.map((k) => [k.name, k.public_key]), [["alice-laptop", sshKey]]);
    page.once("dialog", (d) => d.accept());
    await row.getByTestId("ssh-key-remove-alice-laptop").click();
    await row.waitFor({ state: "detached" });
    const after = await pool.api.ok("GET", `/v1/users/${alice.user}/ssh-keys`);
    assert.deepEqual(after.keys, [], "removed on the server");
    await page.goBack();
    await page.getByTestId("task-connect").waitFor();
  });

  step("opens a running task's port from its page", async (page) => {
    const port = await freePort();
    const app = "import http.server\n" +
      "class H(http.server.BaseHTTPRequestHandler):\n" +
      "  def do_GET(self):\n" +
      "    body = ('hello from the app at ' + self.path).encode()\n" +
      "    self.send_response(200)\n" +
      "    self.send_header('Content-Type', 'text/plain')\n" +
      "    self.send_header('Content-Length', str(len(body)))\n" +
      "    self.end_headers()\n" +
      "    self.wfile.write(body)\n" +
      "  def log_message(self, *a): pass\n" +
      `http.server.ThreadingHTTPServer(('127.0.0.1', ${port}), H).serve_forever()\n`;
    const served = await pool.api.ok("POST", "/v1/tasks", {
      project: alice.project, command: ["/usr/bin/python3", "-c", app], ports: [port] });
    await page.goto(`/tasks/${served.id}`);
    await waitForTaskState(page, "running");
    const open = page.getByTestId(`task-open-${port}`);
    await eventually("the Open link", async () => (await open.getAttribute("href")) !== null);
    const href = await open.getAttribute("href");
    assert.match(href, new RegExp(`^/t/${served.id}/${port}/\\?gpupool_link=`));
    assert.equal(await open.getAttribute("target"), "_blank");
    // What the new tab does: the link is exchanged for the port's cookie, then the app answers.
    await eventually("the app through the gateway", async () => {
      await page.goto(href);
      return (await page.textContent("body")).includes(`hello from the app at /t/${served.id}/${port}/`);
    }, timeouts.task);
    await pool.api.ok("POST", `/v1/tasks/${served.id}/stop`);
    await page.goto(`/tasks/${taskId}`);
    await page.getByTestId("task-connect").waitFor();
  });

  stepOnTask("snapshots it from its page", async (page) => {
    await page.getByTestId("task-snapshot").click();
    const note = page.getByTestId("task-snapshot-note");
    await note.waitFor({ timeout: timeouts.task });
    assert.match(await note.textContent(), /^Snapshot s-\d+: \d+ files, .* new\), crash-consistent, frozen \d+ ms$/);
    const { snapshots } = await pool.api.ok("GET", `/v1/snapshots?task=${taskId}`);
    assert.equal(snapshots.length, 1);
    assert.equal(snapshots[0].trigger, "manual");
    manualSnapshot = snapshots[0].id;
    assert.match(await note.textContent(), new RegExp(`^Snapshot ${manualSnapshot}: `));
    // The page's list shows it at once: the Snapshot button's answer refreshes it.
    const row = page.getByTestId("task-snapshots")
      .locator(`[data-testid="snapshot-row"][data-snapshot="${manualSnapshot}"]`);
    await row.waitFor();
    assert.equal(await row.getAttribute("data-trigger"), "manual");
    assert.match(await row.textContent(), /manual.*crash/);
    assert.equal(await row.getByTestId("snapshot-resume").count(), 0, "no resume while it runs");
  });

  stepOnTask("stops it from its page", async (page) => {
    const asked = new Promise((answer) => page.once("dialog", (d) => {
      answer(d.message());
      return d.accept();
    }));
    await page.getByTestId("task-stop").click();
    assert.equal(await asked, `Stop ${taskId}?`, "the page asks before it stops");
    await waitForTaskState(page, "stopped");
    const task = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    assert.equal(task.state, "stopped");
    assert.match(task.reason, new RegExp(`stopped by ${alice.user}`));
  });

  stepOnTask("downloads its output", async (page) => {
    // The agent saves a stopped task's outputs after the stop: wait for the server to have them,
    // then refresh the page's listing, as a user would.
    await eventually("result.txt on the server", async () => {
      const files = await pool.api.ok("GET", `/v1/tasks/${taskId}/files`);
      return files.files.some((f) => f.path === "result.txt");
    }, timeouts.task);
    await page.getByTestId("files-refresh").click();
    const row = page.locator('[data-testid="file-row"][data-path="result.txt"]');
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      row.getByTestId("file-download").click(),
    ]);
    assert.equal(download.suggestedFilename(), "result.txt");
    assert.equal(await readFile(await download.path(), "utf8"),
                 input.toString().toUpperCase(), "the output the task made from its input");
  });

  stepOnTask("lists its snapshots newest first, the stop's arriving live", async (page) => {
    // The stop took a snapshot before the task ended; the page hears of it on the live stream.
    let listed;
    await eventually("the stop's snapshot", async () => {
      ({ snapshots: listed } = await pool.api.ok("GET", `/v1/snapshots?task=${taskId}`));
      return listed.some((x) => x.trigger === "stop");
    }, timeouts.task);
    stopSnapshot = listed.find((x) => x.trigger === "stop").id;
    const newestFirst = listed.map((x) => x.id).reverse();
    assert.equal(newestFirst[0], stopSnapshot);
    assert.ok(newestFirst.includes(manualSnapshot), newestFirst.join(", "));
    await page.waitForFunction((ids) => {
      const rows = document.querySelectorAll('[data-testid="task-snapshots"] [data-testid="snapshot-row"]');
      return [...rows].map((r) => r.getAttribute("data-snapshot")).join(",") === ids.join(",");
    }, newestFirst, { timeout: timeouts.task });
    const top = page.locator(`[data-testid="snapshot-row"][data-snapshot="${stopSnapshot}"]`);
    assert.equal(await top.getAttribute("data-trigger"), "stop");
  });

  stepOnTask("resumes it from its last snapshot", async (page) => {
    // The page offers to resume from the stop's snapshot.
    await page.reload();
    await page.getByTestId("task-resume").click();
    await waitForTaskState(page, "running");
    const task = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    assert.equal(task.run, 2);
    assert.match(task.resume_from, /^s-\d+$/);
    const facts = page.getByTestId("task-facts");
    await eventually("the run and the snapshot on the page", async () =>
      (await facts.textContent()).includes(`Resumes from${task.resume_from}`));
    await pool.api.ok("POST", `/v1/tasks/${taskId}/stop`, { discard: true });
  });

  stepOnTask("resumes it from the snapshot of a row of its list", async (page) => {
    await waitForTaskState(page, "stopped");
    const row = page.locator(`[data-testid="snapshot-row"][data-snapshot="${manualSnapshot}"]`);
    await row.getByTestId("snapshot-resume").click();
    await waitForTaskState(page, "running");
    const task = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    assert.equal(task.run, 3);
    assert.equal(task.resume_from, manualSnapshot, "resumed from the row's snapshot, not the latest");
    const facts = page.getByTestId("task-facts");
    await eventually("the row's snapshot on the page", async () =>
      (await facts.textContent()).includes(`Resumes from${manualSnapshot}`));
    assert.equal(await row.getByTestId("snapshot-resume").count(), 0, "no resume while it runs");
    await pool.api.ok("POST", `/v1/tasks/${taskId}/stop`, { discard: true });
    await waitForTaskState(page, "stopped");
  });

  stepOnTask("deletes a snapshot from its list, after asking", async (page) => {
    const asked = new Promise((answer) => page.once("dialog", (d) => {
      answer(d.message());
      return d.accept();
    }));
    const row = page.locator(`[data-testid="snapshot-row"][data-snapshot="${manualSnapshot}"]`);
    await row.getByTestId("snapshot-delete").click();
    assert.equal(await asked, `Delete ${manualSnapshot}? The storage it alone holds is freed.`);
    await row.waitFor({ state: "detached" });
    const { snapshots } = await pool.api.ok("GET", `/v1/snapshots?task=${taskId}`);
    assert.ok(!snapshots.some((x) => x.id === manualSnapshot),
              `still listed: ${snapshots.map((x) => x.id).join(", ")}`);
    assert.equal((await pool.api.call("GET", `/v1/snapshots/${manualSnapshot}`)).status, 404);
    await page.locator(`[data-testid="snapshot-row"][data-snapshot="${stopSnapshot}"]`).waitFor();
    // The task resumed from it: its next run now starts from its latest other snapshot, and the
    // page says so.
    const task = await pool.api.ok("GET", `/v1/tasks/${taskId}`);
    assert.equal(task.resume_from, stopSnapshot);
    const facts = page.getByTestId("task-facts");
    await eventually("the task's new snapshot on the page", async () =>
      (await facts.textContent()).includes(`Resumes from${stopSnapshot}`));
  });
});
