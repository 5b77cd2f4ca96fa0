// Pool arithmetic for the overview: GPUs by model (total, in use, free; whole and fractional)
// from the nodes' views, each GPU saying what of it is free (`milli_free`, which the server
// computes — MIG instances by their compute-slice share — so the console keeps no GPU catalog).
import type { Node } from "../api/types.gen";

export interface ModelCount {
  model: string;
  gpus: number;
  /** milli-GPU given to tasks, on every node */
  usedMilli: number;
  /** milli-GPU free on the nodes that take work (ready, not cordoned) */
  freeMilli: number;
  /** GPUs with nothing given to tasks on the nodes that take work */
  wholeFree: number;
}

/** GPUs by model, sorted by model name. */
export function gpusByModel(nodes: Node[]): ModelCount[] {
  const out = new Map<string, ModelCount>();
  for (const n of nodes) {
    const schedulable = n.status === "ready" && !n.cordoned;
    for (const g of n.gpus) {
      const m = out.get(g.model) ?? { model: g.model, gpus: 0, usedMilli: 0, freeMilli: 0, wholeFree: 0 };
      m.gpus += 1;
      m.usedMilli += 1000 - g.milli_free;
      if (schedulable) {
        m.freeMilli += g.milli_free;
        if (g.milli_free === 1000) m.wholeFree += 1;
      }
      out.set(g.model, m);
    }
  }
  return [...out.values()].sort((a, b) => (a.model < b.model ? -1 : 1));
}
