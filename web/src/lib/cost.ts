// A task's cost so far (GET /v1/tasks/{id}/cost: billed plus accrued), cached per task so that a
// list can show it for the rows in view without asking twice: a finished task's cost is final,
// a live one's is asked again after 30 s.
import { useEffect, useState } from "preact/hooks";
import { call } from "../api/client";
import type { TaskCost } from "../api/types.gen";

const cache = new Map<string, { at: number; final: boolean; cost: Promise<TaskCost> }>();

export function taskCost(id: string, final: boolean): Promise<TaskCost> {
  const hit = cache.get(id);
  if (hit && (hit.final || Date.now() - hit.at < 30_000)) return hit.cost;
  const cost = call("getTaskCost", { path: { id } });
  cache.set(id, { at: Date.now(), final, cost });
  cost.catch(() => cache.delete(id));
  return cost;
}

/**
 * cost_micros + accrued_micros of the task, once known. Asked only once the caller has been
 * mounted for `delayMs` (a row that stays in view), so scrolling through a long list sends no
 * request for the rows it flies past.
 */
export function useTaskCost(id: string, final: boolean, delayMs = 300): number | undefined {
  const [micros, setMicros] = useState<number | undefined>(undefined);
  useEffect(() => {
    let live = true;
    const timer = window.setTimeout(() => {
      taskCost(id, final).then(
        (c) => live && setMicros(c.cost_micros + c.accrued_micros),
        () => {},
      );
    }, delayMs);
    return () => {
      live = false;
      window.clearTimeout(timer);
    };
  }, [id, final]);
  return micros;
}
