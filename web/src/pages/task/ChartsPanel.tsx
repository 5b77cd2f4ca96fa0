// The task page's live charts (uPlot): GPU utilisation, GPU memory, CPU and RAM — the one-minute
// history of the last 24 h joined with the raw 1 Hz points of the last minutes, then each usage
// event as it arrives — and every metric the task reports against `step`.
import { useEffect, useMemo, useState } from "preact/hooks";
import { call } from "../../api/client";
import { useLive } from "../../api/live";
import type { ReportedMetrics } from "../../api/types.gen";
import { Chart, seriesColor } from "../../components/Chart";
import { Empty, ErrorBox } from "../../components/ui";
import { formatNumber } from "../../lib/format";
import { appendRow, gaugeData, hasStep, mergeHistory, metricData, metricNames, rowOfSample, type UsageRow } from "./series";

const kMaxReported = 5000;

export function ChartsPanel({ task }: { task: string }) {
  const [rows, setRows] = useState<UsageRow[]>([]);
  const [reported, setReported] = useState<ReportedMetrics[]>([]);
  const [latest, setLatest] = useState<Record<string, number>>({});
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let live = true;
    Promise.all([
      call("getTaskMetrics", { path: { id: task }, query: { resolution: "1m" } }),
      call("getTaskMetrics", { path: { id: task }, query: { resolution: "raw" } }),
    ]).then(
      ([minutes, raw]) => {
        if (!live) return;
        setRows(mergeHistory(minutes.usage, raw.usage));
        setReported(raw.reported);
        setLatest(raw.latest);
        setError(null);
      },
      (e) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [task, tick]);

  useLive("usage", (e) => e.task === task && setRows((old) => appendRow(old, rowOfSample(e.sample))), [task]);
  useLive(
    "metrics",
    (e) => {
      if (e.task !== task) return;
      setReported((old) => [...old, { time_ms: e.time_ms, values: e.values }].slice(-kMaxReported));
      setLatest((old) => ({ ...old, ...e.values }));
    },
    [task],
  );
  useLive("resync", () => setTick((t) => t + 1), []);

  const util = useMemo(() => gaugeData(rows, "gpu_util_pct"), [rows]);
  const gmem = useMemo(() => gaugeData(rows, "gpu_mem_mib", 1024), [rows]);
  const cpu = useMemo(() => gaugeData(rows, "cpu_milli", 1000), [rows]);
  const ram = useMemo(() => gaugeData(rows, "memory_mib", 1024), [rows]);
  const names = useMemo(() => metricNames(reported), [reported]);
  const byStep = hasStep(reported);
  const metricSeries = useMemo(() => names.map((n) => metricData(reported, n, byStep)), [reported, names, byStep]);
  // The latest value of each metric the task reports (and its step), kept live by the metrics
  // events. The server's `latest` also holds the built-ins (gpu_util, gpu_idle_s,
  // interactive_idle_s, idle_s, runtime_s), which no event updates: the charts and the task's
  // facts show those live instead.
  const facts = useMemo(() => {
    const reportedNames = new Set(byStep ? [...names, "step"] : names);
    return Object.entries(latest).filter(([k]) => reportedNames.has(k));
  }, [latest, names, byStep]);

  return (
    <section class="panel" aria-labelledby="charts-title" data-testid="task-charts">
      <h2 id="charts-title">Usage</h2>
      <ErrorBox error={error} testid="charts-error" />
      {rows.length === 0 ? (
        <Empty>No usage samples yet: they arrive about once a second while the task runs.</Empty>
      ) : (
        <div class="charts">
          <Chart title="GPU utilisation (%)" testid="chart-gpu-util" series={[{ label: "GPU util", color: seriesColor(0), value: (v) => `${v.toFixed(0)}%` }]} data={util} yRange={[0, 100]} />
          <Chart title="GPU memory (GiB)" testid="chart-gpu-mem" series={[{ label: "GPU mem", color: seriesColor(1), value: (v) => `${v.toFixed(2)} GiB` }]} data={gmem} />
          <Chart title="CPU (cores)" testid="chart-cpu" series={[{ label: "CPU", color: seriesColor(2), value: (v) => v.toFixed(2) }]} data={cpu} />
          <Chart title="RAM (GiB)" testid="chart-ram" series={[{ label: "RAM", color: seriesColor(3), value: (v) => `${v.toFixed(2)} GiB` }]} data={ram} />
        </div>
      )}
      <h2>Reported metrics</h2>
      {facts.length > 0 && (
        <dl class="facts inline" data-testid="metrics-latest">
          {facts.map(([k, v]) => (
            <div key={k}>
              <dt>{k}</dt>
              <dd data-metric={k}>{formatNumber(v)}</dd>
            </div>
          ))}
        </dl>
      )}
      {names.length === 0 ? (
        <Empty>
          No metrics reported yet: the task appends JSON lines to <code>$GPUPOOL_METRICS_FILE</code>, e.g. <code>{'{"step": 100, "loss": 0.42}'}</code>.
        </Empty>
      ) : (
        <div class="charts">
          {names.map((n, i) => (
            <Chart key={n} title={`${n} vs ${byStep ? "step" : "time"}`} testid={`chart-metric-${n}`} time={!byStep} xLabel={byStep ? "step" : undefined} series={[{ label: n, color: seriesColor(i + 4), value: formatNumber }]} data={metricSeries[i]} />
          ))}
        </div>
      )}
    </section>
  );
}
