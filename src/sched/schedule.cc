// ScheduleOnce (see schedule.h): the placement pipeline over a queue.
#include "sched/schedule.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_set>

namespace gpupool::sched {
namespace {

// The nodes that may host the request's GPU form, ascending; nodes ruled out by the model index
// are counted in `rejects` without being visited. Returns a span instead of calling back so that
// the caller's per-node loop (the hot loop of a decision) is one tight, inlined loop.
std::span<const int> Candidates(const ClusterState& state, const RequestView& view,
                                RejectCounts& rejects, std::vector<int>& scratch) {
  if (view.form == GpuForm::kNone) return state.AllNodes();
  const int no_gpu = static_cast<int>(state.NodesWithoutGpus().size());
  rejects.counts[static_cast<size_t>(Reject::kNoGpu)] += no_gpu;
  if (view.model_allowed.empty()) return state.NodesWithGpus();
  scratch.clear();
  for (size_t id = 0; id < view.model_allowed.size(); ++id) {
    if (!view.model_allowed[id]) continue;
    const auto nodes = state.NodesOfModel(static_cast<int>(id));
    scratch.insert(scratch.end(), nodes.begin(), nodes.end());
  }
  std::sort(scratch.begin(), scratch.end());
  scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
  rejects.counts[static_cast<size_t>(Reject::kWrongModel)] +=
      state.NodeCount() - no_gpu - static_cast<int>(scratch.size());
  return scratch;
}

// A buffer that grows without initialising its elements: PickNode writes each element before
// reading it, and clearing tens of kilobytes per decision is a visible part of a decision's time
// on a large cluster.
template <typename T>
class Scratch {
 public:
  T* Get(size_t n) {
    if (n > capacity_) {
      data_ = std::make_unique_for_overwrite<T[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

// Index of the top score: the first one (kLowestIndex), or a uniform one among those tied at the
// top (kRandom: reservoir sampling, one draw from `rng` per tie met). Not inlined into the large
// Pass::Place so that the loop over thousands of scores keeps its counters in registers.
[[gnu::noinline]] size_t PickTop(std::span<const int64_t> scores, bool random,
                                 std::mt19937_64& rng) {
  size_t pick = 0;
  uint64_t tied = 1;
  for (size_t i = 1; i < scores.size(); ++i) {
    if (scores[i] > scores[pick]) {
      pick = i;
      tied = 1;
    } else if (random && scores[i] == scores[pick]) {
      ++tied;
      if (UniformIndex(rng, tied) == 0) pick = i;
    }
  }
  return pick;
}

class Pass {
 public:
  Pass(ClusterState& state, Policy& policy, const ScheduleOptions& options, Plan& plan)
      : state_(state), policy_(policy), options_(options), plan_(plan) {}

  void Run(std::span<const QueuedTask> queue) {
    std::unordered_set<std::string> gangs_done;
    for (const QueuedTask& t : queue) {
      if (t.request.gang_size > 1) {
        if (gangs_done.insert(t.request.gang_id).second) PlaceGang(queue, t.request.gang_id);
        continue;
      }
      RejectCounts rejects;
      if (auto a = Place(t, rejects)) {
        plan_.assignments.push_back(std::move(*a));
      } else if (auto pre = options_.allow_preemption ? Preempt(t) : std::nullopt) {
        plan_.assignments.push_back(std::move(*pre));
      } else {
        plan_.pending.push_back(Pending(t, rejects, ""));
      }
    }
  }

 private:
  PendingTask Pending(const QueuedTask& t, const RejectCounts& rejects, const std::string& prefix) {
    std::string why = prefix + "no node fits: " + rejects.Summary(t.request);
    if (!bind_error_.empty()) why = prefix + std::exchange(bind_error_, "");
    return PendingTask{t.id, std::move(why), rejects.Reasons(t.request)};
  }

  // The node the policy picks among the feasible ones, or -1 (then `rejects` says why).
  int PickNode(const RequestView& view, RejectCounts& rejects) {
    scanned_ = Candidates(state_, view, rejects, candidates_);
    rejects_pending_ = false;
    int* feasible = feasible_.Get(scanned_.size());  // room for every candidate
    size_t count = 0;
    const SummaryFilter filter(view);
    if (filter.usable()) {
      // Rejection reasons are counted only when someone reads them (CountRejects): a decision
      // that places its task drops them.
      count = filter.FilterAll(state_, view, feasible);
      rejects_pending_ = true;
    } else {
      for (const int n : scanned_) {
        const Reject r = CheckNode(state_, n, view);
        if (r == Reject::kNone) {
          feasible[count++] = n;
        } else {
          rejects.Add(r);
        }
      }
    }
    if (count == 0) {
      CountRejects(view, rejects);
      return -1;
    }
    if (count == 1) return feasible[0];
    int64_t* scores = scores_.Get(count);
    policy_.ScoreNodes(state_, std::span<const int>(feasible, count), view,
                       std::span<int64_t>(scores, count));
    const bool random = policy_.tie_break() == TieBreak::kRandom;
    return feasible[PickTop(std::span<const int64_t>(scores, count), random, policy_.rng())];
  }

  std::optional<Assignment> Place(const QueuedTask& t, RejectCounts& rejects) {
    const RequestView view(state_, t.request);
    const int node = PickNode(view, rejects);
    if (node < 0) return std::nullopt;
    Placement p = policy_.ChooseGpus(state_, node, view);
    if (mig_journal_ != nullptr && p.mig && p.mig->action != MigAction::kUseFree) {
      const Gpu& g = state_.node(node).gpus[static_cast<size_t>(p.gpus[0])];
      mig_journal_->push_back(MigLayout{node, p.gpus[0], g.mig_enabled, g.mig_instances});
    }
    if (auto ok = state_.Bind(t.id, t.request, p); !ok) {
      CountRejects(view, rejects);  // the pending task lists them
      // The policy chose GPUs that do not fit: a bug in the policy, reported, not hidden.
      bind_error_ = "internal error, policy " + std::string(policy_.Name()) +
                    " chose a placement that does not fit: " + ok.error().message;
      return std::nullopt;
    }
    return Assignment{t.id, std::move(p), {}};
  }

  // Adds to `rejects` the reason of each node of the last PickNode scan that did not fit, if that
  // scan left them out (the state has not changed since).
  void CountRejects(const RequestView& view, RejectCounts& rejects) {
    if (!rejects_pending_) return;
    rejects_pending_ = false;
    for (const int n : scanned_) {
      const Reject r = CheckNode(state_, n, view);
      if (r != Reject::kNone) rejects.Add(r);
    }
  }

  // Cheapest set of strictly lower-priority tasks on one node whose release lets `t` fit there.
  // Cost, compared in order: highest victim priority, number of victims, their GPU milli, node.
  // The search only asks "would it fit?" of node copies (FitsAfterRelease); the state changes only
  // once the winner is known.
  std::optional<Assignment> Preempt(const QueuedTask& t) {
    const int priority = t.request.priority;
    if (priority <= kMinPriority) return std::nullopt;
    const RequestView view(state_, t.request);
    using Cost = std::tuple<int, size_t, int64_t, int>;
    std::optional<Cost> best_cost;
    std::vector<const Binding*> best_victims;
    RejectCounts ignored;
    for (const int n : Candidates(state_, view, ignored, candidates_)) {
      if (!state_.node(n).schedulable) continue;
      std::vector<const Binding*> lower;
      for (const std::string& id : state_.TasksOn(n)) {
        const Binding* b = state_.FindBinding(id);
        if (b->request.priority < priority) lower.push_back(b);
      }
      auto victims = CheapestVictims(n, t.request, std::move(lower));
      if (!victims) continue;
      int top = 0;
      int64_t milli = 0;
      for (const Binding* v : *victims) {
        top = std::max(top, v->request.priority);
        milli += v->request.GpuMilli();
      }
      const Cost cost{top, victims->size(), milli, n};
      if (!best_cost || cost < *best_cost) {
        best_cost = cost;
        best_victims = std::move(*victims);
      }
    }
    if (!best_cost) return std::nullopt;
    const int node = std::get<3>(*best_cost);
    Assignment a{t.id, {}, {}};
    std::vector<Binding> released;
    for (const Binding* v : best_victims) {
      released.push_back(*v);
      a.preempted.push_back(v->task_id);
      plan_.preemptions.push_back(Preemption{
          v->task_id, t.id,
          v->task_id + " (priority " + std::to_string(v->request.priority) + ") preempted by " +
              t.id + " (priority " + std::to_string(priority) + ") to fit on " +
              state_.node(node).name});
    }
    for (const Binding& v : released) (void)state_.Unbind(v.task_id);
    a.placement = policy_.ChooseGpus(state_, node, view);
    if (!state_.Bind(t.id, t.request, a.placement)) {
      // Cannot happen after FitsAfterRelease said yes; undo rather than leave victims stopped.
      for (const Binding& v : released) (void)state_.Bind(v.task_id, v.request, v.placement);
      plan_.preemptions.resize(plan_.preemptions.size() - released.size());
      return std::nullopt;
    }
    return a;
  }

  // Whether `r` fits node `n` once `victims` have given back what they hold, decided on a copy of
  // the node in a one-node state.
  bool FitsAfterRelease(int n, const TaskRequest& r, std::span<const Binding* const> victims) {
    Node copy = state_.node(n);
    for (const Binding* v : victims) ApplyToNode(copy, *v, -1);
    const ClusterState one(std::vector<Node>{std::move(copy)});
    return CheckNode(one, 0, RequestView(one, r)) == Reject::kNone;
  }

  // The cheapest victims on node `n` among `lower` (tasks of lower priority than `r`'s), or
  // nullopt when even all of them are not enough. Priority levels are tried from the lowest: the
  // first level whose tasks (with all lower ones) make room sets the top victim priority; within
  // it the fewest victims, then the least GPU milli, found by trying subsets in increasing size.
  // Beyond kMaxExact candidates the subsets are too many: release lowest priority first (most
  // recently bound first among equals), then give back every victim not needed.
  std::optional<std::vector<const Binding*>> CheapestVictims(int n, const TaskRequest& r,
                                                             std::vector<const Binding*> lower) {
    constexpr size_t kMaxExact = 12;
    std::reverse(lower.begin(), lower.end());  // most recently bound first
    std::stable_sort(lower.begin(), lower.end(), [](const Binding* a, const Binding* b) {
      return a->request.priority < b->request.priority;
    });
    for (size_t level_end = 0; level_end < lower.size();) {
      const int level = lower[level_end]->request.priority;
      while (level_end < lower.size() && lower[level_end]->request.priority == level) ++level_end;
      const std::span<const Binding* const> pool(lower.data(), level_end);
      if (!FitsAfterRelease(n, r, pool)) continue;
      if (pool.size() > kMaxExact) return GreedyVictims(n, r, pool);
      for (size_t k = 1; k <= pool.size(); ++k) {
        std::optional<std::vector<const Binding*>> best;
        int64_t best_milli = 0;
        ForEachSubset(pool, k, [&](const std::vector<const Binding*>& subset) {
          if (std::none_of(subset.begin(), subset.end(),
                           [&](const Binding* b) { return b->request.priority == level; })) {
            return;  // lower levels alone were already not enough
          }
          int64_t milli = 0;
          for (const Binding* b : subset) milli += b->request.GpuMilli();
          if (best && milli >= best_milli) return;
          if (FitsAfterRelease(n, r, subset)) {
            best = subset;
            best_milli = milli;
          }
        });
        if (best) return best;
      }
    }
    return std::nullopt;
  }

  std::vector<const Binding*> GreedyVictims(int n, const TaskRequest& r,
                                            std::span<const Binding* const> pool) {
    std::vector<const Binding*> victims;
    for (const Binding* b : pool) {
      victims.push_back(b);
      if (FitsAfterRelease(n, r, victims)) break;
    }
    for (size_t i = victims.size(); i-- > 0;) {
      std::vector<const Binding*> without = victims;
      without.erase(without.begin() + static_cast<long>(i));
      if (FitsAfterRelease(n, r, without)) victims = std::move(without);
    }
    return victims;
  }

  // Calls fn with every k-element subset of `pool`, in lexicographic order of positions.
  template <typename F>
  static void ForEachSubset(std::span<const Binding* const> pool, size_t k, F&& fn) {
    std::vector<size_t> idx(k);
    for (size_t i = 0; i < k; ++i) idx[i] = i;
    std::vector<const Binding*> subset(k);
    while (true) {
      for (size_t i = 0; i < k; ++i) subset[i] = pool[idx[i]];
      fn(subset);
      size_t i = k;
      while (i > 0 && idx[i - 1] == pool.size() - k + i - 1) --i;
      if (i == 0) return;
      ++idx[i - 1];
      for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
    }
  }

  // All members of the gang are placed, or none (gangs do not preempt).
  void PlaceGang(std::span<const QueuedTask> queue, const std::string& gang_id) {
    std::vector<const QueuedTask*> members;
    for (const QueuedTask& t : queue) {
      if (t.request.gang_size > 1 && t.request.gang_id == gang_id) members.push_back(&t);
    }
    const int size = members.front()->request.gang_size;
    if (static_cast<int>(members.size()) < size) {
      const std::string why = "gang " + gang_id + " waits for its members: " +
                              std::to_string(members.size()) + " of " + std::to_string(size) +
                              " queued";
      for (const QueuedTask* m : members) plan_.pending.push_back(PendingTask{m->id, why, {}});
      return;
    }
    std::vector<Assignment> placed;
    std::vector<MigLayout> journal;  // MIG layouts as they were before a member changed them
    mig_journal_ = &journal;
    for (const QueuedTask* m : members) {
      RejectCounts rejects;
      if (auto a = Place(*m, rejects)) {
        placed.push_back(std::move(*a));
        continue;
      }
      mig_journal_ = nullptr;
      // Undo in reverse: release the members, then put the MIG layouts back as they were.
      for (auto it = placed.rbegin(); it != placed.rend(); ++it) (void)state_.Unbind(it->task_id);
      for (auto it = journal.rbegin(); it != journal.rend(); ++it) {
        (void)state_.SetMigLayout(it->node, it->gpu, it->mig_enabled, it->instances);
      }
      const PendingTask why =
          Pending(*m, rejects, "gang " + gang_id + ": member " + m->id + " does not fit, ");
      for (const QueuedTask* other : members) {
        PendingTask p = why;
        p.task_id = other->id;
        plan_.pending.push_back(std::move(p));
      }
      return;
    }
    mig_journal_ = nullptr;
    for (Assignment& a : placed) plan_.assignments.push_back(std::move(a));
  }

  ClusterState& state_;
  Policy& policy_;
  const ScheduleOptions& options_;
  Plan& plan_;
  Scratch<int> feasible_;  // PickNode: the nodes that fit, ascending
  Scratch<int64_t> scores_;  // PickNode: their scores
  std::vector<int> candidates_;
  std::span<const int> scanned_;  // the last PickNode's candidates (in state_ or candidates_)
  bool rejects_pending_ = false;  // the last PickNode did not count its rejects yet
  std::string bind_error_;
  struct MigLayout {
    int node;
    int gpu;
    bool mig_enabled;
    std::vector<MigInstance> instances;
  };
  std::vector<MigLayout>* mig_journal_ = nullptr;  // set while a gang is being placed        // set when a policy's placement failed to bind
};

}  // namespace

Plan ScheduleOnce(ClusterState& state, std::span<const QueuedTask> queue, Policy& policy,
                  const ScheduleOptions& options) {
  Plan plan;
  Pass(state, policy, options, plan).Run(queue);
  return plan;
}

}  // namespace gpupool::sched
