// The console's unit tests (node:test, no browser): the pure modules of web/src — request
// signing (docs/api.md's worked example), the stop-condition port (against the very tables of
// core's own tests, src/core/stop_condition_test.cc, so the two cannot drift apart), the CLI's
// units and parsers, shell words, upload paths, the zip writer, the overview's GPU counts, volumes'
// names, sizes and mounts, datasets' mounts. The
// TypeScript is bundled in memory with esbuild (Vite's own dependency). Run: node
// scripts/unit-tests.mjs (npm test).
import assert from "node:assert/strict";
import { webcrypto } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

if (!globalThis.crypto) globalThis.crypto = webcrypto; // node 18

const web = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const modules = ["api/sign", "lib/stop_condition", "lib/format", "lib/parse", "lib/shell", "lib/upload", "lib/zip", "lib/pool", "lib/volumes", "lib/datasets"];
const entry = modules.map((m, i) => `export * as m${i} from "./src/${m}.ts";`).join("\n");
const out = await build({ stdin: { contents: entry, resolveDir: web, loader: "ts" }, bundle: true, format: "esm", platform: "neutral", write: false, logLevel: "error" });
const dir = mkdtempSync(join(tmpdir(), "console-unit-"));
writeFileSync(join(dir, "bundle.mjs"), out.outputFiles[0].text);
const lib = await import(pathToFileURL(join(dir, "bundle.mjs")).href);
rmSync(dir, { recursive: true });
const [sign, stop, format, parse, shell, upload, zip, pool, volumes, datasets] = modules.map((_, i) => lib[`m${i}`]);

test("signing: docs/api.md's worked example and the canonical query", async () => {
  assert.equal(sign.canonicalQuery("state=running,pending&limit=5"), "limit=5&state=running%2Cpending");
  assert.equal(sign.canonicalQuery("b=2&a=1"), "a=1&b=2");
  assert.equal(sign.canonicalQuery("q=a+b&&x"), "q=a%20b&x=");
  const header = await sign.authorization("AK1", "s3cr3t-key", "POST", "/v1/tasks?b=2&a=1", '{"command":["true"]}', 1700000000000, "0123456789abcdef");
  assert.equal(header, "GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=1700000000000, Nonce=0123456789abcdef, Signature=5a722047f8c6f81ccbf6a7ebe7d360621351a832bc1ad543ff498d7e3b1582c5");
  assert.match(sign.newNonce(), /^[0-9a-f]{32}$/);
});

// The string-literal pairs of one TEST(StopConditionTest, name) of core's tests.
function cppPairs(name) {
  const src = readFileSync(resolve(web, "../src/core/stop_condition_test.cc"), "latin1");
  const start = src.indexOf(`TEST(StopConditionTest, ${name})`);
  assert.ok(start >= 0, `core's test ${name} exists`);
  const body = src.slice(start, src.indexOf("\nTEST(", start + 1));
  const lit = String.raw`"((?:[^"\\]|\\.)*)"`;
  const pairs = [];
  const re = new RegExp(String.raw`\{${lit},\s*((?:${lit}\s*)+)\}`, "g");
  for (const m of body.matchAll(re)) {
    const second = [...m[2].matchAll(new RegExp(lit, "g"))].map((x) => x[1]).join("");
    const unescape = (s) => JSON.parse(`"${s.replace(/\\x([0-9a-f]{2})/g, "\\u00$1")}"`);
    pairs.push([unescape(m[1]), unescape(second)]);
  }
  return pairs;
}

test("stop conditions: refused with core's messages and columns", () => {
  const rows = cppPairs("RefusesBadTextSayingWhereAndWhat");
  assert.ok(rows.length >= 30, `read ${rows.length} rows from core's table`);
  for (const [text, message] of rows) {
    // Core's table writes a raw UTF-8 byte as \xc3\xa9: the same bytes as the string "é".
    const typed = new TextDecoder().decode(Uint8Array.from(text, (c) => c.charCodeAt(0)));
    assert.equal(stop.parseStopCondition(typed).error, message, text);
  }
});

test("stop conditions: canonical text as core prints it", () => {
  const rows = cppPairs("ToStringIsCanonicalAndRoundTrips");
  assert.ok(rows.length >= 19, `read ${rows.length} rows from core's table`);
  for (const [text, canonical] of rows) {
    assert.equal(stop.parseStopCondition(text).canonical, canonical, text);
    assert.equal(stop.parseStopCondition(canonical).canonical, canonical, `${canonical} round-trips`);
  }
});

test("stop conditions: the limits (length, canonical length, nesting, name length)", () => {
  let text = "x > 1";
  while (text.length + 9 <= 1024) text += " || x > 1";
  text += " ".repeat(1024 - text.length);
  assert.equal(stop.checkStopCondition(text), null);
  assert.equal(stop.checkStopCondition(text + " "), "stop_when: longer than 1024 characters (1025)");
  assert.equal(stop.checkStopCondition("x>1" + "||x>1".repeat(200)), "stop_when: longer than 1024 characters once written as 1805 in canonical form");
  const nested = (parens, nots) => "!".repeat(nots) + "(".repeat(parens) + "x > 1" + ")".repeat(parens);
  assert.equal(stop.checkStopCondition(nested(32, 0)), null);
  assert.equal(stop.checkStopCondition(nested(0, 32)), null);
  assert.equal(stop.checkStopCondition(nested(33, 0)), "stop_when: at column 33: nested deeper than 32 levels of '(' and '!'");
  assert.equal(stop.checkStopCondition(nested(18, 16)), "stop_when: at column 34: nested deeper than 32 levels of '(' and '!'");
  const n64 = "n".repeat(64);
  assert.equal(stop.checkStopCondition(`${n64} > 1`), null);
  assert.equal(stop.checkStopCondition(`x > 1 || ${n64}n > 1`), `stop_when: at column 10: metric name '${n64}n' is longer than 64 characters`);
  assert.equal(stop.checkStopCondition(""), null, "empty: no condition");
  assert.equal(stop.formatConditionNumber(1800), "1800");
  assert.equal(stop.formatConditionNumber(1e-7), "1e-07");
  assert.equal(stop.formatConditionNumber(1e6), "1e+06");
});

test("units are formatted as the CLI formats them", () => {
  assert.equal(format.formatMoney(3750000), "3.750000");
  assert.equal(format.formatMoney(-500000), "-0.500000");
  assert.equal(format.formatMoney(1), "0.000001");
  assert.equal(format.formatMib(16384), "16Gi");
  assert.equal(format.formatMib(512), "512Mi");
  assert.equal(format.formatMib(1048576), "1Ti");
  assert.equal(format.formatMib(0), "0");
  assert.equal(format.formatBytes(512), "512 B");
  assert.equal(format.formatBytes(1536), "1.5 KiB");
  assert.equal(format.formatBytes(12 * 1024 * 1024), "12.0 MiB");
  assert.equal(format.formatMilli(1250), "1.25");
  assert.equal(format.formatMilli(500), "0.5");
  assert.equal(format.formatMilli(2000), "2");
  assert.equal(format.formatDuration(192000), "3m12s");
  assert.equal(format.formatDuration(7500000), "2h5m");
  assert.equal(format.formatDuration(86400000), "1d");
  assert.equal(format.formatDuration(450), "450ms");
  assert.equal(format.formatDuration(3600000 + 1000), "1h");
  assert.equal(format.formatAge(1000, 62500), "1m1s");
  assert.equal(format.formatAge(0, 5), "-");
  assert.equal(format.formatTime(1700000000000), "2023-11-14T22:13:20Z");
  assert.equal(format.formatGpuRequest({ gpu_count: 0, gpu_milli: 500, gpu_mem_mib: 8192, mig_profile: "" }), "0.5+8Gi");
  assert.equal(format.formatGpuRequest({ gpu_count: 2, gpu_milli: 0, gpu_mem_mib: 0, mig_profile: "" }), "2");
  assert.equal(format.formatGpuRequest({ gpu_count: 0, gpu_milli: 0, gpu_mem_mib: 0, mig_profile: "3g.40gb" }), "3g.40gb");
  assert.equal(format.shellJoin(["python", "a b.py", "it's"]), `python 'a b.py' 'it'\\''s'`);
});

test("what people type is parsed with the CLI's rules and messages", () => {
  assert.equal(parse.parseDuration("1h30m").value, 5400000);
  assert.equal(parse.parseDuration(" 90s ").value, 90000);
  assert.equal(parse.parseDuration("500ms").value, 500);
  assert.equal(parse.parseDuration("30").error, "invalid duration '30': use a number and a unit, like 90s, 15m, 2h, 1h30m or 1d");
  assert.equal(parse.parseDuration("30m1h").error, "invalid duration '30m1h': units go from largest to smallest, each once (like 1h30m)");
  assert.equal(parse.parseMib("16Gi").value, 16384);
  assert.equal(parse.parseMib("512").value, 512);
  assert.equal(parse.parseMib("1T").value, 1048576);
  assert.ok(parse.parseMib("16 apples").error);
  assert.equal(parse.parseGib("50").value, 50);
  assert.equal(parse.parseGib("500M").value, 1);
  assert.equal(parse.parseMilli("0.5").value, 500);
  assert.equal(parse.parseMilli("2").value, 2000);
  assert.equal(parse.parseMilli("1.125").value, 1125);
  assert.ok(parse.parseMilli("1.1255").error);
  assert.equal(parse.parseMoney("12.5").value, 12500000);
  assert.equal(parse.parseMoney("0.1234567").error, "amount '0.1234567' has more than six decimals (the smallest unit is 0.000001)");
  assert.equal(parse.parseInteger("--gpus", "9", 1, 8).error, "--gpus must be an integer in 1..8, got '9'");
  assert.equal(parse.parseInteger("--gpus", "3", 1, 8).value, 3);
});

test("a command line becomes argv with the shell's quoting, and unclosed quotes are named", () => {
  assert.deepEqual(shell.splitCommand(`python train.py --lr '1e-4'`).value, ["python", "train.py", "--lr", "1e-4"]);
  assert.deepEqual(shell.splitCommand(`/bin/sh -c 'echo "a b"; x=$((1+1))'`).value, ["/bin/sh", "-c", `echo "a b"; x=$((1+1))`]);
  assert.deepEqual(shell.splitCommand(`echo "a \\"b\\"" c\\ d ''`).value, ["echo", `a "b"`, "c d", ""]);
  assert.deepEqual(shell.splitCommand("   ").value, []);
  assert.equal(shell.splitCommand("echo 'oops").error, "command: the ' at column 6 is not closed");
});

test("picked files get the task paths `gpupool submit --input` gives them", () => {
  const file = (name, rel = "") => Object.assign(new Blob(["x"]), { name, webkitRelativePath: rel });
  assert.deepEqual(upload.planUploads([file("input.txt")], "").map((p) => p.path), ["input.txt"]);
  assert.deepEqual(upload.planUploads([file("input.txt")], "data/in.txt").map((p) => p.path), ["data/in.txt"]);
  assert.deepEqual(upload.planUploads([file("a"), file("b")], "in/").map((p) => p.path), ["in/a", "in/b"]);
  assert.deepEqual(upload.planUploads([file("a", "ds/a"), file("b", "ds/sub/b")], "").map((p) => p.path), ["ds/a", "ds/sub/b"]);
  assert.deepEqual(upload.planUploads([file("a", "ds/a")], "data").map((p) => p.path), ["data/a"]);
});

test("the zip writer makes a well-formed store-only archive", async () => {
  assert.equal(zip.crc32(new TextEncoder().encode("123456789")), 0xcbf43926);
  const a = new TextEncoder().encode("hello\n");
  const blob = zip.zip([{ path: "a.txt", data: a, date: new Date(2024, 4, 1, 12, 0, 0) }, { path: "sub/é.bin", data: new Uint8Array([0, 1, 2]) }]);
  const bytes = new Uint8Array(await blob.arrayBuffer());
  const view = new DataView(bytes.buffer);
  const end = bytes.length - 22;
  assert.equal(view.getUint32(end, true), 0x06054b50, "end of central directory record");
  assert.equal(view.getUint16(end + 10, true), 2, "two entries");
  const cd = view.getUint32(end + 16, true);
  assert.equal(view.getUint32(cd, true), 0x02014b50);
  assert.equal(view.getUint32(cd + 16, true), zip.crc32(a));
  assert.equal(view.getUint32(0, true), 0x04034b50, "a local header first");
  assert.equal(new TextDecoder().decode(bytes.subarray(30, 35)), "a.txt");
  assert.equal(new TextDecoder().decode(bytes.subarray(35, 41)), "hello\n", "stored, not compressed");
  assert.equal(view.getUint32(end + 12, true) + cd, end, "the central directory ends where the end record starts");
});

test("the overview counts GPUs by model from each GPU's free share: shares, MIG, cordoned nodes", () => {
  const gpu = (index, milli_free, extra = {}) => ({ index, model: "A100-80GB", uuid: `g${index}`, mem_mib: 81920, mig_enabled: false, mig_instances: [], milli_free, mig_memory_slots: 8, ...extra });
  const node = (name, gpus, extra = {}) => ({ name, status: "ready", cordoned: false, draining: false, gpus, ...extra });
  // n1: a whole GPU bound, a 500-milli share, two idle GPUs, a MIG GPU with a 3g.40gb in use (3/7).
  const mig = gpu(4, 572, { mig_enabled: true, mig_instances: [{ profile: "3g.40gb", start: 0, in_use: true, memory_slices: 4 }] });
  const nodes = [
    node("n1", [gpu(0, 0), gpu(1, 500), gpu(2, 1000), gpu(3, 1000), mig]),
    node("n2", [{ ...gpu(0, 1000), model: "T4", mig_memory_slots: 0 }, { ...gpu(1, 0), model: "T4", mig_memory_slots: 0 }], { cordoned: true }),
  ];
  const [a100, t4] = pool.gpusByModel(nodes);
  assert.deepEqual(a100, { model: "A100-80GB", gpus: 5, usedMilli: 1000 + 500 + 428, freeMilli: 500 + 2000 + 572, wholeFree: 2 });
  assert.deepEqual(t4, { model: "T4", gpus: 2, usedMilli: 1000, freeMilli: 0, wholeFree: 0 }, "a cordoned node takes no work: nothing of it is free");
});

test("volumes: names, sizes and mounts are checked with core's rules and messages", () => {
  const GiB = 2 ** 30;
  assert.equal(volumes.parseVolumeSize("200", "GiB").value, 200 * GiB);
  assert.equal(volumes.parseVolumeSize(" 1.5 ", "TiB").value, 1.5 * 2 ** 40);
  assert.equal(volumes.parseVolumeSize("0.001", "GiB").value, Math.round(GiB / 1000));
  assert.equal(volumes.parseVolumeSize("1024", "TiB").value, 2 ** 50, "1 PiB: the largest");
  assert.equal(volumes.parseVolumeSize("1025", "TiB").error, "size '1025 TiB' is larger than a volume may be (1 PiB)");
  assert.equal(volumes.parseVolumeSize("0", "GiB").error, "size must be larger than 0");
  assert.equal(volumes.parseVolumeSize("200Gi", "GiB").error, "invalid size '200Gi': use a number of GiB, like 200 or 1.5");
  assert.equal(volumes.parseVolumeSize("", "TiB").error, "invalid size '': use a number of TiB, like 200 or 1.5");
  assert.deepEqual(volumes.volumeSizeField(2 * 2 ** 40), { text: "2", unit: "TiB" });
  assert.deepEqual(volumes.volumeSizeField(1536 * GiB), { text: "1536", unit: "GiB" });
  assert.deepEqual(volumes.volumeSizeField(GiB / 2), { text: "0.5", unit: "GiB" });
  assert.equal(volumes.checkVolumeName("data-1.v2_x"), null);
  assert.equal(volumes.checkVolumeName(""), "name '' must be 1 to 63 characters");
  assert.equal(volumes.checkVolumeName("a".repeat(64)), `name '${"a".repeat(64)}' must be 1 to 63 characters`);
  assert.equal(volumes.checkVolumeName("Data"), "name 'Data' must start with a lower-case letter or a digit");
  assert.equal(volumes.checkVolumeName("my data"), "name 'my data' may hold only lower-case letters, digits, '_', '.' and '-'");
  assert.equal(volumes.checkVolumeName("v-12"), "name 'v-12' is a volume id's form (v-<number>); choose another name");
  assert.equal(volumes.checkVolumeName("v-1x"), null);
  assert.equal(volumes.volumeMountPath("/root/data/").value, "/root/data");
  assert.equal(volumes.volumeMountPath("data//sub/.").value, "/root/data/sub");
  assert.equal(volumes.volumeMountPath("/root").error, "path '/root' is the task's whole workspace /root: mount a volume below it, e.g. /root/data");
  assert.equal(volumes.volumeMountPath("/rootfs/x").error, "path '/rootfs/x' is outside the task's workspace /root: mount a volume below it, e.g. /root/data");
  assert.equal(volumes.volumeMountPath("/root/../etc").error, "path '/root/../etc' has a '..' component; paths may not leave the workspace");
  const m = (volume, path, read_only = false) => ({ volume, path, read_only });
  assert.deepEqual(volumes.checkMounts([m("a", "a/"), m("b", "/root/b", true)]).value, [m("a", "/root/a"), m("b", "/root/b", true)]);
  assert.equal(volumes.checkMounts([m("", "/root/a")]).error, "volumes[0]: pick a volume");
  assert.equal(volumes.checkMounts([m("a", "/root/a"), m("a", "/root/b")]).error, "volumes[1].volume 'a' is mounted twice");
  assert.equal(volumes.checkMounts([m("a", "/root/a"), m("b", "/root/a/x")]).error, "volumes[1].path /root/a/x overlaps volumes[0].path /root/a");
  assert.equal(volumes.checkMounts([m("a", "/tmp")]).error, "volumes[0].path '/tmp' is outside the task's workspace /root: mount a volume below it, e.g. /root/data");
  assert.equal(volumes.checkMounts(Array.from({ length: 17 }, (_, i) => m(`v${i}`, `/root/${i}`))).error, "volumes: 17 mounts; at most 16 are allowed");
  assert.equal(volumes.volumeWhere({ shared: true, node: "" }), "shared storage");
  assert.equal(volumes.volumeWhere({ shared: false, node: "n1" }), "n1");
  assert.equal(volumes.volumeWhere({ shared: false, node: "" }), "its first task's node");
});

test("datasets: a task's mounts are checked with core's rules and messages, apart from its volumes", () => {
  const d = (dataset, path, version = 0) => ({ dataset, version, path });
  assert.deepEqual(datasets.checkDatasetMounts([d("imagenet", "data/"), d("coco", "/root/coco", 3)], []).value, [d("imagenet", "/root/data"), d("coco", "/root/coco", 3)]);
  assert.equal(datasets.checkDatasetMounts([d("", "/root/a")], []).error, "datasets[0]: pick a dataset");
  assert.equal(datasets.checkDatasetMounts([d("a", "/root")], []).error, "datasets[0].path '/root' is the task's whole workspace /root: mount a volume below it, e.g. /root/data");
  assert.equal(datasets.checkDatasetMounts([d("a", "/root/a"), d("a", "/root/b", 2)], []).error, "datasets[1].dataset 'a' is mounted twice");
  assert.equal(datasets.checkDatasetMounts([d("a", "/root/a/x"), d("b", "/root/a")], []).error, "datasets[1].path /root/a overlaps datasets[0].path /root/a/x");
  assert.equal(datasets.checkDatasetMounts([d("a", "/root/out/in")], [{ path: "/root/ckpt" }, { path: "/root/out" }]).error, "datasets[0].path /root/out/in overlaps volumes[1].path /root/out");
  assert.equal(datasets.checkDatasetMounts(Array.from({ length: 9 }, (_, i) => d(`d${i}`, `/root/${i}`)), []).error, "datasets: 9 mounts; at most 8 are allowed");
  assert.equal(datasets.datasetAt("imagenet", 2), "imagenet@2");
  assert.equal(datasets.datasetAt("imagenet", 0), "imagenet");
  assert.equal(datasets.latestVersion({ versions: [{ version: 1 }, { version: 3 }] }).version, 3);
  assert.equal(datasets.latestVersion({ versions: [] }), undefined);
});
