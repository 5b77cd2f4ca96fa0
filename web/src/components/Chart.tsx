// A uPlot time-series (or x-y) chart that follows its container's width and takes new data
// without being rebuilt: the task page's live usage and reported-metric charts.
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface ChartSeries {
  label: string;
  color: string;
  /** Formats a value for the legend (units). */
  value?: (v: number) => string;
}

const kColors = ["#2f6fdf", "#d9622b", "#1f9d6b", "#9b4dca", "#c0392b", "#7f8c8d", "#b7950b", "#16a085"];
export const seriesColor = (i: number) => kColors[i % kColors.length];

export function Chart(props: {
  title: string;
  series: ChartSeries[];
  data: uPlot.AlignedData;
  /** x is a time in seconds (the default) or a plain number (e.g. step). */
  time?: boolean;
  xLabel?: string;
  yRange?: [number, number];
  height?: number;
  testid: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = props.series.map((s) => s.label).join("|") + (props.time === false ? "|n" : "|t");

  useEffect(() => {
    const el = box.current!;
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 200),
      height: props.height ?? 180,
      scales: { x: { time: props.time !== false }, y: props.yRange ? { range: props.yRange } : { auto: true } },
      axes: [{ label: props.xLabel }, { size: 56 }],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      series: [
        { label: props.xLabel ?? "time" },
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 1.5,
          spanGaps: false,
          value: s.value ? (_: uPlot, v: number | null) => (v === null ? "-" : s.value!(v)) : undefined,
        })),
      ],
    };
    const u = new uPlot(opts, props.data, el);
    plot.current = u;
    el.dataset.points = String(props.data[0].length);
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(el.clientWidth, 200), height: props.height ?? 180 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [shape]);

  useEffect(() => {
    // Not the data the plot was just built with (a mount runs both effects).
    if (plot.current && plot.current.data !== props.data) plot.current.setData(props.data);
    if (box.current) box.current.dataset.points = String(props.data[0].length);
  }, [props.data]);

  return (
    <figure class="chart" data-testid={props.testid} aria-label={props.title}>
      <figcaption>{props.title}</figcaption>
      <div ref={box} class="chart-plot" />
    </figure>
  );
}
