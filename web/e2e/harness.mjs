// The console's end-to-end harness: a real `gpupool up` per suite (temporary data dir, a free
// loopback port, simulated GPUs), a signed REST client for the suites' set-up (projects, users,
// keys, tasks; the same GPUPOOL-HMAC-SHA256 scheme as docs/api.md "Authentication"), the CLI as
// one of its users (what only the CLI does, such as pushing a dataset), and a
// Chromium fixture (Debian's /usr/bin/chromium driven by playwright-core) that keeps a trace and
// a screenshot of every failed test in the build directory. Nothing here sleeps to synchronise:
// the server is ready when it prints its banner, and pages are awaited on their own state.
import { execFile, spawn } from "node:child_process";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { accessSync, constants, createWriteStream, mkdirSync, mkdtempSync, readFileSync,
         rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { after, before } from "node:test";

const here = dirname(fileURLToPath(import.meta.url));
const installHint = "run scripts/install-deps.sh --test (and build with ninja -C build)";

// Where failed tests' traces and screenshots, the servers' logs and the budgets' figures go
// (web/CMakeLists.txt points it into the build tree).
export const artifactsDir = resolve(process.env.GPUPOOL_E2E_ARTIFACTS ??
                                    join(here, "..", "..", "build", "web", "e2e"));
// The console's build (the dist directory the binary embeds), for the bundle-size budget.
export const consoleDist = resolve(process.env.GPUPOOL_CONSOLE_DIST ??
                                   join(here, "..", "..", "build", "web", "dist"));
const gpupoolBinary = resolve(process.env.GPUPOOL_BINARY ??
                              join(here, "..", "..", "build", "src", "cmd", "gpupool"));
const chromiumPath = process.env.GPUPOOL_CHROMIUM ?? "/usr/bin/chromium";

// Every timeout of the suites, in one place; generous because the test machines are shared.
export const timeouts = {
  serverStart: 30_000,  // spawn → banner → /healthz
  nodeReady: 30_000,    // the local agent registered and ready
  page: 15_000,         // one page state to appear
  task: 60_000,         // a task to be placed, to start, to stop
};

function requireExecutable(path, what) {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`${what} is missing (${path} is not an executable file): ${installHint}`);
  }
}

// ---- the server ---------------------------------------------------------------------------

const livePools = new Set();
// The servers die with this process whatever way it ends: each has a watchdog (below), and a
// normal exit kills what the suites did not stop.
process.on("exit", () => {
  for (const pool of livePools) pool.killNow();
});

// A running `gpupool up` with its admin credentials.
export class Pool {
  constructor(proc, watchdog, dataDir, url, admin, logPath) {
    this.proc = proc;
    this.watchdog = watchdog;
    this.dataDir = dataDir;
    this.url = url;
    this.admin = admin;
    this.logPath = logPath;
    this.api = new ApiClient(url, admin.accessKey, admin.secretKey);
    this.exited = new Promise((resolveExit) => proc.once("exit", (code, signal) =>
      resolveExit(code ?? 128 + (signal === "SIGKILL" ? 9 : 15))));
  }

  killNow() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
    this.watchdog.kill("SIGKILL");
  }

  // Stops every task still live, and waits until the agent has ended the ones it ran: tasks
  // outlive `gpupool up` for their supervisors' lease (docker tasks longer; the next one
  // re-adopts them), so a suite that ends early, or the
  // screenshots' training task, would leave them running on this machine. A task's output is
  // complete once its agent stopped it and shipped the rest (docs/api.md "Logs and metrics"):
  // the log read waits for that (long-poll), with a deadline.
  async stopTasks() {
    const live = "pending,scheduled,starting,running,preempted";
    const { tasks } = await this.api.ok("GET", `/v1/tasks?state=${live}&limit=1000`);
    for (const t of tasks) await this.api.ok("POST", `/v1/tasks/${t.id}/stop`);
    const deadline = Date.now() + timeouts.task;
    for (const t of tasks.filter((x) => x.bound_ms > 0)) {
      let offset = 0;
      for (;;) {
        const log = await this.api.ok("GET",
          `/v1/tasks/${t.id}/logs?offset=${offset}&max_bytes=4194304&wait_ms=5000`);
        if (log.complete) break;
        if (Date.now() > deadline) {
          throw new Error(`task ${t.id} was stopped but its agent did not end it within ` +
                          `${timeouts.task} ms`);
        }
        offset = log.next_offset;
      }
    }
  }

  // Stops the live tasks (above), then SIGTERM and the exit status (0 after a graceful
  // shutdown); SIGKILL if it hangs.
  async stop({ keepDataDir = false } = {}) {
    await this.stopTasks();
    livePools.delete(this);
    this.watchdog.kill("SIGKILL");
    this.proc.kill("SIGTERM");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), timeouts.serverStart);
    const status = await this.exited;
    clearTimeout(timer);
    if (!keepDataDir) rmSync(this.dataDir, { recursive: true, force: true });
    return status;
  }

  // Polls GET /v1/nodes/NAME until the local agent's node is ready: the agent registers on its
  // own thread after the banner, and the API offers no event for it.
  async waitForNode(name) {
    const deadline = Date.now() + timeouts.nodeReady;
    let last = "";
    while (Date.now() < deadline) {
      const r = await this.api.call("GET", `/v1/nodes/${name}`);
      if (r.status === 200 && r.json.status === "ready") return r.json;
      last = `${r.status} ${JSON.stringify(r.json)}`;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    throw new Error(`node ${name} did not become ready within ${timeouts.nodeReady} ms: ${last}`);
  }
}

// Starts `gpupool up --data-dir TMP --listen 127.0.0.1:0 --simulate-gpus GPUS --node-name NODE`
// and returns once it serves (its banner's endpoint line, then /healthz) with its node ready.
export async function startPool({ suite, gpus = "A100-80GB:2", node = "e2e", extraArgs = [] }) {
  requireExecutable(gpupoolBinary, "the gpupool binary");
  mkdirSync(artifactsDir, { recursive: true });
  const dataDir = mkdtempSync(join(tmpdir(), `gpupool-e2e-${suite}-`));
  const logPath = join(artifactsDir, `${suite}.server.log`);
  const log = createWriteStream(logPath);
  const proc = spawn(gpupoolBinary, ["up", "--data-dir", dataDir, "--listen", "127.0.0.1:0",
                                     "--simulate-gpus", gpus, "--node-name", node, ...extraArgs],
                     { stdio: ["ignore", "pipe", "pipe"] });
  // A watchdog whose stdin is a pipe from this process: when this process dies, however (even
  // SIGKILL from ctest's timeout), the pipe closes and the watchdog kills the server and removes
  // its data dir (a SIGKILLed process writes nothing more). Tasks it was running then keep
  // running: only stop() stops them.
  const watchdog = spawn("/bin/sh", ["-c", 'while read -r _; do :; done; kill -9 "$0" ' +
                                     '2>/dev/null; rm -rf "$1"', String(proc.pid),
                                     dataDir], { stdio: ["pipe", "ignore", "ignore"] });
  // None of these keeps this process alive by itself (a suite that ends without stopping its
  // server must not hang the runner): the exit handler above and the watchdog stop the server.
  for (const handle of [proc, proc.stdout, proc.stderr, watchdog, watchdog.stdin]) handle.unref();
  proc.stderr.pipe(log);
  const seen = [];
  let onEarlyExit;
  const url = await new Promise((resolveUrl, reject) => {
    const lines = createInterface({ input: proc.stdout });
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`gpupool up printed no endpoint within ${timeouts.serverStart} ms; ` +
                       `its output:\n${seen.join("\n")}`));
    }, timeouts.serverStart);
    onEarlyExit = (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`gpupool up exited (${code ?? signal}) before serving; its output:\n` +
                       `${seen.join("\n")}\n(stderr in ${logPath})`));
    };
    proc.once("exit", onEarlyExit);
    lines.on("line", (line) => {
      log.write(line + "\n");
      seen.push(line);
      const m = /^gpupool up: endpoint (\S+)$/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]);
      }
    });
  });
  proc.off("exit", onEarlyExit);
  const env = Object.fromEntries(readFileSync(join(dataDir, "credentials.env"), "utf8")
    .split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")),
                                                            l.slice(l.indexOf("=") + 1)]));
  const pool = new Pool(proc, watchdog, dataDir, url,
                        { accessKey: env.GPUPOOL_ACCESS_KEY, secretKey: env.GPUPOOL_SECRET_KEY },
                        logPath);
  livePools.add(pool);
  await waitForHealthz(url);
  await pool.waitForNode(node);
  return pool;
}

// The process has printed its endpoint; /healthz confirms the HTTP server answers (polled with
// a deadline: a process start sends no event).
async function waitForHealthz(url) {
  const deadline = Date.now() + timeouts.serverStart;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.status === 200) return;
      last = `HTTP ${r.status}`;
    } catch (e) {
      last = String(e);
    }
    await new Promise((ok) => setTimeout(ok, 50));
  }
  throw new Error(`${url}/healthz did not answer 200 within ${timeouts.serverStart} ms: ${last}`);
}

// ---- the signed REST client ----------------------------------------------------------------

function percentEncode(s) {
  let out = "";
  for (const byte of Buffer.from(s, "utf8")) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : "%" + byte.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

// docs/api.md: split on '&', drop empty pieces, split at the first '=', percent-decode ('+' is a
// space), sort by name then value, encode again, join.
function canonicalQuery(query) {
  const decode = (s) => decodeURIComponent(s.replace(/\+/g, " "));
  const pairs = query.split("&").filter((p) => p !== "").map((p) => {
    const eq = p.indexOf("=");
    return eq < 0 ? [decode(p), ""] : [decode(p.slice(0, eq)), decode(p.slice(eq + 1))];
  });
  const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  pairs.sort((a, b) => cmp(a[0], b[0]) || cmp(a[1], b[1]));
  return pairs.map(([n, v]) => `${percentEncode(n)}=${percentEncode(v)}`).join("&");
}

function authorization(method, pathWithQuery, body, accessKey, secretKey,
                              timestampMs = Date.now(), nonce = randomBytes(16).toString("hex")) {
  const q = pathWithQuery.indexOf("?");
  const path = q < 0 ? pathWithQuery : pathWithQuery.slice(0, q);
  const query = q < 0 ? "" : pathWithQuery.slice(q + 1);
  const canonical = [method, path, canonicalQuery(query),
                     createHash("sha256").update(body).digest("hex"), String(timestampMs),
                     nonce].join("\n");
  const signature = createHmac("sha256", secretKey).update(canonical).digest("hex");
  return `GPUPOOL-HMAC-SHA256 Credential=${accessKey}, Timestamp=${timestampMs}, ` +
         `Nonce=${nonce}, Signature=${signature}`;
}

export class ApiClient {
  constructor(url, accessKey, secretKey) {
    this.url = url;
    this.accessKey = accessKey;
    this.secretKey = secretKey;
  }

  // One signed request; `body` is an object (sent as JSON), a Buffer/string (sent as is) or
  // undefined. Answers {status, json, text}.
  async call(method, pathWithQuery, body) {
    const payload = body === undefined ? Buffer.alloc(0)
      : Buffer.isBuffer(body) ? body
      : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    const headers = { authorization: authorization(method, pathWithQuery, payload, this.accessKey,
                                                   this.secretKey) };
    if (payload.length > 0) headers["content-type"] = "application/json";
    const r = await fetch(this.url + pathWithQuery,
                          { method, headers, body: payload.length > 0 ? payload : undefined });
    const text = await r.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON (a file's content): the caller reads `text`
    }
    return { status: r.status, json, text };
  }

  // A call that must succeed: its JSON, or an error naming the request and the server's answer.
  async ok(method, pathWithQuery, body) {
    const r = await this.call(method, pathWithQuery, body);
    if (r.status < 200 || r.status > 299) {
      throw new Error(`${method} ${pathWithQuery} answered ${r.status}: ${r.text}`);
    }
    return r.json;
  }
}

// A project and a member of it with a key of their own: {project, user, accessKey, secretKey}.
export async function createMember(api, { project, user }) {
  await api.ok("POST", "/v1/projects", { id: project });
  await api.ok("POST", "/v1/users", { id: user, role: "member", projects: [project] });
  const key = await api.ok("POST", `/v1/users/${user}/keys`, { description: "console e2e" });
  return { project, user, accessKey: key.access_key, secretKey: key.secret_key };
}

// Runs the CLI (`gpupool ARGS…`) in `cwd` as `who` ({accessKey, secretKey}) against the pool, with
// a HOME of its own (no profile of the machine's); its stdout, or an error with its output.
export function runCli(pool, who, args, cwd) {
  const env = { ...process.env, GPUPOOL_ENDPOINT: pool.url, GPUPOOL_ACCESS_KEY: who.accessKey,
                GPUPOOL_SECRET_KEY: who.secretKey, HOME: cwd };
  return new Promise((resolveRun, reject) => execFile(gpupoolBinary, args, { cwd, env },
    (error, stdout, stderr) => (error
      ? reject(new Error(`gpupool ${args.join(" ")} failed: ${error.message}\n${stdout}${stderr}`))
      : resolveRun(stdout))));
}

// ---- the browser --------------------------------------------------------------------------

// Chromium through playwright-core: headless, --no-sandbox when running as root (Chromium's
// sandbox refuses root).
export async function launchBrowser() {
  requireExecutable(chromiumPath, "Chromium");
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch (e) {
    throw new Error(`playwright-core cannot be loaded (${e.message}): the console's build runs ` +
                    `npm ci in web/; ${installHint}`);
  }
  const args = process.getuid && process.getuid() === 0 ? ["--no-sandbox"] : [];
  return chromium.launch({ executablePath: chromiumPath, headless: true, args });
}

function safeName(s) {
  return s.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 120);
}

// A browser context on the pool's origin (1280×800, its trace recorded) and its page, shared by
// the steps of one flow. A step that throws leaves a full-page screenshot under
// artifactsDir/<suite>/<step>.png, and the context's trace is kept (<suite>/<name>.trace.zip)
// when any step failed; the step's error is rethrown with where they are.
export class BrowserSession {
  static async open(browser, pool, suite,
                    { name = "session", viewport = { width: 1280, height: 800 } } = {}) {
    const context = await browser.newContext({ baseURL: pool.url, viewport,
                                               acceptDownloads: true });
    context.setDefaultTimeout(timeouts.page);
    await context.tracing.start({ screenshots: true, snapshots: true });
    const page = await context.newPage();
    return new BrowserSession(pool, suite, name, context, page);
  }

  constructor(pool, suite, name, context, page) {
    this.pool = pool;
    this.context = context;
    this.page = page;
    this.dir = join(artifactsDir, suite);
    this.trace = join(this.dir, `${safeName(name)}.trace.zip`);
    this.failed = false;
    this.pageErrors = [];
    page.on("pageerror", (e) => this.pageErrors.push(String(e)));
  }

  async step(name, body) {
    try {
      await body(this.page, this.context);
    } catch (e) {
      this.failed = true;
      mkdirSync(this.dir, { recursive: true });
      const shot = join(this.dir, `${safeName(name)}.png`);
      await this.page.screenshot({ path: shot, fullPage: true }).catch(() => {});
      const errors = this.pageErrors.length ? `; page errors: ${this.pageErrors.join(" | ")}` : "";
      e.message += `\n  (screenshot ${shot}; trace ${this.trace} once the ` +
                   `suite ends — npx playwright-core show-trace it; server log ` +
                   `${this.pool.logPath}${errors})`;
      throw e;
    }
  }

  async close() {
    if (this.failed) {
      mkdirSync(this.dir, { recursive: true });
      await this.context.tracing.stop({ path: this.trace }).catch(() => {});
    } else {
      await this.context.tracing.stop().catch(() => {});
    }
    await this.context.close();
  }
}

// ---- a suite ------------------------------------------------------------------------------

// A suite's fixture, registered as its before/after hooks: Chromium and a pool of its own
// (startPool's options), then `setUp(fixture)`; after the tests, the sessions it opened, the
// browser and the pool are closed and the pool's exit status checked (0: a graceful shutdown) —
// and also when the start fails half-way, since node 18 runs no after hook then.
export function useSuite(suite, { pool = {}, setUp } = {}) {
  const fixture = {
    suite,
    browser: null,
    pool: null,
    sessions: [],
    // A browser session (BrowserSession) closed with the suite.
    async openSession(options) {
      const session = await BrowserSession.open(fixture.browser, fixture.pool, suite, options);
      fixture.sessions.push(session);
      return session;
    },
    // `body(page, context)` as one step in a fresh session of its own (a clean browser: no
    // cookie), closed after it.
    async withPage(name, body, options) {
      const session = await BrowserSession.open(fixture.browser, fixture.pool, suite,
                                                { ...options, name });
      try {
        await session.step(name, body);
      } finally {
        await session.close();
      }
    },
  };
  const tearDown = async () => {
    for (const session of fixture.sessions.splice(0)) await session.close().catch(() => {});
    await fixture.browser?.close();
    fixture.browser = null;
    const running = fixture.pool;
    fixture.pool = null;
    return running ? running.stop() : 0;
  };
  before(async () => {
    try {
      fixture.browser = await launchBrowser();
      fixture.pool = await startPool({ suite, ...pool });
      if (setUp) await setUp(fixture);
    } catch (e) {
      await tearDown().catch(() => {});
      throw e;
    }
  });
  after(async () => {
    assert.equal(await tearDown(), 0, "gpupool up exits 0 on SIGTERM");
  });
  return fixture;
}

// Polls an async check of the server's state until it returns true (or {ok: true}) or `timeout`
// passes, as tests/server_process.h's Eventually: only for state another process owns and shows
// only through its API (a task's outputs arriving from its agent). Page state is awaited with
// Playwright's own waits (locators, waitForFunction), never with this.
export async function eventually(what, check, timeout = timeouts.page) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last === true || (last && last.ok)) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} did not happen within ${timeout} ms (last: ${
        last instanceof Error ? last.message : JSON.stringify(last)})`);
    }
    await new Promise((ok) => setTimeout(ok, 50));
  }
}
