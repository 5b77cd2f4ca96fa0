// Pool arithmetic for the overview: GPUs by model (total, in use, free; whole and fractional)
// from the nodes' views, and where each MIG instance sits inside its GPU.
import type { Node, Task } from "../api/types.gen";

export interface ModelCount {
  model: string;
  gpus: number;
  /** milli-GPU free (fractional) */
  freeMilli: number;
  /** GPUs with nothing allocated on them (whole), when the allocations are known */
  wholeFree: number | null;
}

/**
 * GPUs by model; free counts only ready, uncordoned nodes. A node's free milli-GPU (which the
 * server sums over its GPUs without MIG) is split over its non-MIG GPUs' models by their counts;
 * a MIG GPU counts as free in the share of its memory slices that no instance in use holds.
 * `tasks` (the bound tasks the caller sees — all of them for an admin) tell which GPUs are
 * wholly free: null when `exact` is false (a member sees only their own).
 */
export function gpusByModel(nodes: Node[], tasks: Task[], exact: boolean): ModelCount[] {
  const used = new Map<string, number>(); // "node/gpu" → milli allocated
  for (const t of tasks) {
    const p = t.placement;
    if (!p || !["scheduled", "starting", "running"].includes(t.state)) continue;
    for (const g of p.gpus) used.set(`${p.node}/${g}`, (used.get(`${p.node}/${g}`) ?? 0) + (p.mig_profile ? 1 : p.milli_per_gpu || 1000));
  }
  const out = new Map<string, ModelCount>();
  for (const n of nodes) {
    const byModel = new Map<string, number>(); // model → GPUs without MIG
    const plain = n.gpus.filter((g) => !g.mig_enabled).length;
    for (const g of n.gpus) byModel.set(g.model, (byModel.get(g.model) ?? 0) + (g.mig_enabled ? 0 : 1));
    const schedulable = n.status === "ready" && !n.cordoned;
    for (const [model, count] of byModel) {
      const m = out.get(model) ?? { model, gpus: 0, freeMilli: 0, wholeFree: exact ? 0 : null };
      const migs = n.gpus.filter((g) => g.model === model && g.mig_enabled);
      m.gpus += count + migs.length;
      if (schedulable && plain > 0) m.freeMilli += Math.round((n.gpu_milli_free * count) / plain);
      if (schedulable) {
        for (const g of migs) {
          const used = g.mig_instances.filter((i) => i.in_use).reduce((sum, i) => sum + migSlices(i.profile), 0);
          m.freeMilli += Math.round((1000 * Math.max(0, 8 - used)) / 8);
        }
      }
      if (m.wholeFree !== null && schedulable) {
        m.wholeFree += n.gpus.filter((g) => g.model === model && !used.has(`${n.name}/${g.index}`) && !g.mig_instances.some((i) => i.in_use)).length;
      }
      out.set(model, m);
    }
  }
  return [...out.values()].sort((a, b) => (a.model < b.model ? -1 : 1));
}

/** A MIG profile's memory slices of eight ("3g.40gb" on an A100 → 4), for drawing. */
export function migSlices(profile: string): number {
  const g = Number(/^(\d+)g/.exec(profile)?.[1] ?? 1);
  return g >= 7 ? 8 : g === 3 ? 4 : g;
}
