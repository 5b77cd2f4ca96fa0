// Units for people, formatted exactly as the CLI prints them (src/cli/format.cc, core/duration.cc):
// money from micros, MiB/GiB sizes, bytes, milli-units, durations, ages and times.

const kUnits: Array<[string, number]> = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1000],
];

/** Micros → "12.345678" (six decimals), "-0.500000". */
export function formatMoney(micros: number): string {
  const negative = micros < 0;
  const m = Math.abs(Math.trunc(micros));
  const whole = Math.floor(m / 1_000_000);
  const fraction = String(m % 1_000_000).padStart(6, "0");
  return `${negative ? "-" : ""}${whole}.${fraction}`;
}

/** MiB → "16Gi" when a whole number of GiB, else "512Mi"; 0 → "0". */
export function formatMib(mib: number): string {
  if (mib === 0) return "0";
  if (mib % (1024 * 1024) === 0) return `${mib / (1024 * 1024)}Ti`;
  if (mib % 1024 === 0) return `${mib / 1024}Gi`;
  return `${mib}Mi`;
}

/** Bytes: "512 B", "1.5 KiB", "12.0 MiB", "3.2 GiB". */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit + 1 < units.length) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** Milli-units (CPU, GPU) → "2", "0.5", "1.25". */
export function formatMilli(milli: number): string {
  const negative = milli < 0;
  const m = Math.abs(Math.trunc(milli));
  let out = `${negative ? "-" : ""}${Math.floor(m / 1000)}`;
  const fraction = m % 1000;
  if (fraction !== 0) out += "." + String(fraction).padStart(3, "0").replace(/0+$/, "");
  return out;
}

/** Milliseconds → the two most significant units: "3m12s", "2h5m", "1d", "45s", "450ms". */
export function formatDuration(ms: number): string {
  if (ms < 0) return "-" + formatDuration(-ms);
  if (ms < 1000) return `${Math.trunc(ms)}ms`;
  const seconds = Math.floor(ms / 1000);
  for (let u = 0; u < kUnits.length; u++) {
    const unitS = kUnits[u][1] / 1000;
    if (seconds < unitS) continue;
    let out = `${Math.floor(seconds / unitS)}${kUnits[u][0]}`;
    if (u + 1 < kUnits.length) {
      const nextS = kUnits[u + 1][1] / 1000;
      const rest = Math.floor((seconds % unitS) / nextS);
      if (rest > 0) out += `${rest}${kUnits[u + 1][0]}`;
    }
    return out;
  }
  return `${seconds}s`;
}

/** The age of something that started at `sinceMs` ("3m12s"; "-" when it never did). */
export function formatAge(sinceMs: number, nowMs: number): string {
  if (sinceMs <= 0) return "-";
  const age = nowMs - sinceMs;
  if (age < 1000) return "0s";
  return formatDuration(Math.floor(age / 1000) * 1000);
}

/** Milliseconds since the epoch → "2024-05-01T12:00:00Z"; 0 → "-". */
export function formatTime(ms: number): string {
  if (!ms) return "-";
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** What a task asks of GPUs: "2", "0.5", "0.5+8Gi", "3g.40gb", "-". */
export function formatGpuRequest(t: {
  gpu_count: number;
  gpu_milli: number;
  gpu_mem_mib: number;
  mig_profile: string;
}): string {
  if (t.mig_profile) return t.mig_profile;
  if (t.gpu_milli > 0) return formatMilli(t.gpu_milli) + (t.gpu_mem_mib > 0 ? "+" + formatMib(t.gpu_mem_mib) : "");
  if (t.gpu_count > 0) return String(t.gpu_count);
  return "-";
}

/** A metric value: integers without a fraction, others in their shortest form. */
export function formatNumber(v: number): string {
  if (Number.isInteger(v)) return String(v);
  return String(Number(v.toPrecision(6)));
}

/** A command line for display: arguments joined by spaces, single-quoted when they need it. */
export function shellJoin(args: string[]): string {
  return args
    .map((a) => (a !== "" && /^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`))
    .join(" ");
}
