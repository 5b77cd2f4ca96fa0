// The task page's chart data: the usage history (one-minute points for 24 h, then raw 1 Hz
// points for the last minutes, then live samples as they arrive) as uPlot columns, and the
// reported metrics as one series per metric against `step` (or time when no step is reported).
import type uPlot from "uplot";
import type { ReportedMetrics, UsagePoint, UsageSample } from "../../api/types.gen";

export type Gauge = "gpu_util_pct" | "gpu_mem_mib" | "cpu_milli" | "memory_mib";

/** One usage point in time: seconds and the four gauges (null: not measured). */
export interface UsageRow {
  t: number;
  v: Record<Gauge, number | null>;
}

const kMaxRows = 24 * 60 + 3600;

export function rowOfPoint(p: UsagePoint): UsageRow {
  return { t: p.time_ms / 1000, v: { gpu_util_pct: p.mean.gpu_util_pct, gpu_mem_mib: p.mean.gpu_mem_mib, cpu_milli: p.mean.cpu_milli, memory_mib: p.mean.memory_mib } };
}

export function rowOfSample(s: UsageSample): UsageRow {
  return { t: s.time_ms / 1000, v: { gpu_util_pct: s.gpu_util_pct ?? null, gpu_mem_mib: s.gpu_mem_mib ?? null, cpu_milli: s.cpu_milli ?? null, memory_mib: s.memory_mib ?? null } };
}

/** Minute points older than the first raw point, then the raw points: one time-ordered list. */
export function mergeHistory(minutes: UsagePoint[], raw: UsagePoint[]): UsageRow[] {
  const rawRows = raw.map(rowOfPoint);
  const firstRaw = rawRows.length ? rawRows[0].t : Infinity;
  return [...minutes.map(rowOfPoint).filter((r) => r.t < firstRaw), ...rawRows];
}

/** `rows` with `row` added in time order (a sample already there is replaced). */
export function appendRow(rows: UsageRow[], row: UsageRow): UsageRow[] {
  const last = rows[rows.length - 1];
  if (last && row.t < last.t) return rows;
  const out = last && row.t === last.t ? [...rows.slice(0, -1), row] : [...rows, row];
  return out.length > kMaxRows ? out.slice(out.length - kMaxRows) : out;
}

/** One gauge as uPlot's [x, y] columns, divided by `scale` (MiB → GiB, milli → cores). */
export function gaugeData(rows: UsageRow[], gauge: Gauge, scale = 1): uPlot.AlignedData {
  const xs: number[] = new Array(rows.length);
  const ys: Array<number | null> = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    xs[i] = rows[i].t;
    const v = rows[i].v[gauge];
    ys[i] = v === null ? null : v / scale;
  }
  return [xs, ys];
}

/** The metric names reported (but `step`), in the order first seen. */
export function metricNames(reported: ReportedMetrics[]): string[] {
  const names = new Set<string>();
  for (const r of reported) for (const k of Object.keys(r.values)) if (k !== "step") names.add(k);
  return [...names];
}

/** Whether the task reports `step` (then metrics are charted against it). */
export function hasStep(reported: ReportedMetrics[]): boolean {
  return reported.some((r) => typeof r.values.step === "number");
}

/** One metric against step (or time in seconds): the points that carry it, in x order. */
export function metricData(reported: ReportedMetrics[], name: string, byStep: boolean): uPlot.AlignedData {
  const pts: Array<[number, number]> = [];
  for (const r of reported) {
    const v = r.values[name];
    const x = byStep ? r.values.step : r.time_ms / 1000;
    if (typeof v === "number" && typeof x === "number") pts.push([x, v]);
  }
  pts.sort((a, b) => a[0] - b[0]);
  return [pts.map((p) => p[0]), pts.map((p) => p[1])];
}
