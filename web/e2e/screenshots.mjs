// Takes the screenshots of the console's main pages for docs/img/ (and the README): a real
// `gpupool up` with simulated GPUs (one of them MIG-partitioned), a price and a credit so that
// billing has figures, a training task that reports metrics, a task that cannot be placed and one
// that finished — then Chromium at 1280×800, logged in as the admin, on the overview, the task
// list, the create form, the training task's page at its charts (once they hold a minute of
// points), the nodes and billing. Run by hand after a build, not by the tests:
//   node web/e2e/screenshots.mjs [OUT_DIR]        (default docs/img)
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { login } from "./console.mjs";
import { BrowserSession, launchBrowser, startPool, timeouts } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const outDir = resolve(process.argv[2] ?? join(here, "..", "..", "docs", "img"));
const node = "gpu-1";
// What the training task does: a log line and a metric line every second.
const training = "i=0; while true; do i=$((i+1)); echo \"step $i: loss $(awk -v i=$i " +
  "'BEGIN{printf \"%.4f\", 2/(i+1)}')\"; echo \"{\\\"step\\\": $i, \\\"loss\\\": $(awk -v i=$i " +
  "'BEGIN{printf \"%.4f\", 2/(i+1)}'), \\\"val_acc\\\": $(awk -v i=$i " +
  "'BEGIN{printf \"%.4f\", 1-1/(i+2)}')}\" >> \"$GPUPOOL_METRICS_FILE\"; sleep 1; done";

const pool = await startPool({ suite: "screenshots", node,
                               gpus: "A100-80GB:3,A100-80GB:1:mig=3g.40gb+3g.40gb" });
let browser;
try {
  const api = pool.api;
  await api.ok("PUT", "/v1/prices", { resource: "gpu:A100-80GB", micros_per_hour: 2_500_000 });
  await api.ok("POST", "/v1/projects/default/credits",
               { amount_micros: 500_000_000, note: "welcome credit" });
  const done = await api.ok("POST", "/v1/tasks", { name: "preprocess", gpu_count: 1,
                                                   command: ["/bin/sh", "-c", "echo done"] });
  const train = await api.ok("POST", "/v1/tasks", {
    name: "finetune-llama", gpu_count: 2, cpu_milli: 1000, memory_mib: 2048,
    command: ["/bin/sh", "-c", training], stop_when: "val_acc > 0.999" });
  await api.ok("POST", "/v1/tasks", { name: "too-big", gpu_count: 8,
                                      command: ["/bin/sh", "-c", "true"] });

  browser = await launchBrowser();
  const session = await BrowserSession.open(browser, pool, "screenshots");
  const page = session.page;
  mkdirSync(outDir, { recursive: true });
  const shoot = async (name) => {
    await page.screenshot({ path: join(outDir, `console-${name}.png`) });
    console.log(`wrote ${join(outDir, `console-${name}.png`)}`);
  };
  await session.step("screenshots", async () => {
    await login(page, pool.admin);
    await page.goto(`/tasks/${train.id}`);
    // A minute of the training task's points, so that its charts show a curve.
    await page.waitForFunction(() => {
      const el = document.querySelector('[data-testid="chart-gpu-util"] [data-points]');
      return el !== null && Number(el.getAttribute("data-points")) >= 60;
    }, null, { timeout: 3 * timeouts.task });
    await page.getByTestId("task-charts").evaluate((el) => el.scrollIntoView());
    await shoot("task");
    await page.goto("/");
    await page.getByTestId("heatmap").waitFor();
    await shoot("overview");
    await page.goto("/tasks");
    await page.locator(`[data-testid="task-row"][data-task="${done.id}"]`).waitFor();
    await shoot("tasks");
    await page.goto("/tasks/new");
    await page.getByTestId("create-form").waitFor();
    await shoot("create");
    await page.goto("/nodes");
    await page.getByTestId("page-nodes").waitFor();
    await shoot("nodes");
    await page.goto("/billing");
    await page.getByTestId("page-billing").waitFor();
    await shoot("billing");
  });
  await session.close();
} finally {
  await browser?.close();
  await pool.stop();
}
