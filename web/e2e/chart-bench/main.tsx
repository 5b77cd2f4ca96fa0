// The chart bench's page: mounts the console's Chart (src/components/Chart.tsx) with synthetic
// data — N GPUs' utilisation, one point a minute for 24 hours — and times it from the render
// call until uPlot has drawn (the Chart sets data-points once its plot exists; uPlot draws in a
// microtask queued before that), then a live update (one more point per series). Exposed as
// window.benchChart for budgets.test.mjs.
import { render } from "preact";
import { Chart, seriesColor } from "../../src/components/Chart";

type Data = [number[], ...(number | null)[][]];

function synthetic(gpus: number, points: number, endS: number): Data {
  const xs = Array.from({ length: points }, (_, i) => endS - (points - 1 - i) * 60);
  const series = Array.from({ length: gpus }, (_, g) =>
    xs.map((_, i) => Math.round(50 + 45 * Math.sin(i / (30 + 7 * g)) * Math.cos(i / 400))));
  return [xs, ...series];
}

// Resolves with performance.now() when `el` gets a data-points attribute equal to `points`.
function drawn(el: HTMLElement, points: number): Promise<number> {
  return new Promise((done) => {
    const check = () => {
      const plot = el.querySelector<HTMLElement>("[data-points]");
      if (plot && plot.dataset.points === String(points)) {
        observer.disconnect();
        done(performance.now());
      }
    };
    const observer = new MutationObserver(check);
    observer.observe(el, { subtree: true, childList: true, attributes: true });
  });
}

const nextFrame = () => new Promise<number>((done) => requestAnimationFrame(() => done(performance.now())));

interface Run {
  render_ms: number;       // render() → drawn
  render_frame_ms: number; // render() → the next frame after it was drawn
  update_ms: number;       // new data with one more point each → drawn
  painted_pixels: number;  // non-blank pixels of the plot's canvas (it did draw)
}

async function benchChart(gpus: number, points: number): Promise<Run> {
  const root = document.getElementById("bench")!;
  root.style.width = "1200px";
  render(null, root);
  await nextFrame();
  const series = Array.from({ length: gpus }, (_, g) => ({ label: `GPU ${g}`, color: seriesColor(g) }));
  const end = Math.floor(Date.now() / 1000);
  const data = synthetic(gpus, points, end);
  const t0 = performance.now();
  const shown = drawn(root, points);
  render(<Chart title="GPU utilisation" series={series} data={data} yRange={[0, 100]} testid="bench-chart" />, root);
  const t1 = await shown;
  const t2 = await nextFrame();
  const next = synthetic(gpus, points + 1, end + 60);
  const t3 = performance.now();
  const updated = drawn(root, points + 1);
  render(<Chart title="GPU utilisation" series={series} data={next} yRange={[0, 100]} testid="bench-chart" />, root);
  const t4 = await updated;
  const canvas = root.querySelector("canvas")!;
  const pixels = canvas.getContext("2d")!.getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
  return { render_ms: t1 - t0, render_frame_ms: t2 - t0, update_ms: t4 - t3, painted_pixels: painted };
}

(window as unknown as { benchChart: typeof benchChart }).benchChart = benchChart;
