// ScheduleOnce (see schedule.h): the placement pipeline over a queue.
#include "sched/schedule.h"

#include <algorithm>
#include <map>
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
    if (gang_rules_ != nullptr) count = ApplyGangRules(feasible, count);
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

  // Keeps the nodes of feasible[0, count) that the gang being placed may still use; returns how
  // many.
  size_t ApplyGangRules(int* feasible, size_t count) {
    GangRules& g = *gang_rules_;
    size_t kept = 0;
    for (size_t i = 0; i < count; ++i) {
      const auto n = static_cast<size_t>(feasible[i]);
      const bool ok = (g.allowed == nullptr || (*g.allowed)[n]) &&
                      (g.per_node <= 0 || (*g.on_node)[n] < g.per_node);
      if (ok) {
        feasible[kept++] = feasible[i];
      } else {
        ++g.excluded;
      }
    }
    return kept;
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

  // All members of the gang are placed, or none (gangs do not preempt). At most
  // members_per_node of them on one node; with a topology label, all under one value of it
  // (required), or so where one value can hold them and anywhere otherwise (preferred).
  void PlaceGang(std::span<const QueuedTask> queue, const std::string& gang_id) {
    std::vector<const QueuedTask*> members;
    for (const QueuedTask& t : queue) {
      if (t.request.gang_size > 1 && t.request.gang_id == gang_id) members.push_back(&t);
    }
    const TaskRequest& rules = members.front()->request;
    const int size = rules.gang_size;
    if (static_cast<int>(members.size()) < size) {
      const std::string why = "gang " + gang_id + " waits for its members: " +
                              std::to_string(members.size()) + " of " + std::to_string(size) +
                              " queued";
      for (const QueuedTask* m : members) plan_.pending.push_back(PendingTask{m->id, why, {}});
      return;
    }
    GangTry attempt;
    if (!rules.topology_label.empty()) {
      std::string tried;  // "rack=a: 2 of 4 placed, …" for the reason
      for (const auto& [value, nodes] : TopologyDomains(rules.topology_label)) {
        std::vector<char> allowed(static_cast<size_t>(state_.NodeCount()), 0);
        for (const int n : nodes) allowed[static_cast<size_t>(n)] = 1;
        attempt = TryMembers(members, rules.members_per_node, &allowed);
        if (attempt.failed < 0) return Commit(attempt);
        tried += (tried.empty() ? "" : ", ") + rules.topology_label + "=" + value + ": " +
                 std::to_string(attempt.failed) + " of " + std::to_string(size) + " placed";
      }
      const std::string why =
          "gang " + gang_id + " needs its " + std::to_string(size) +
          " members under one value of node label " + rules.topology_label +
          (tried.empty() ? ": no node has that label" : ": none has room (" + tried + ")");
      if (rules.topology == Topology::kRequired) {
        for (const QueuedTask* m : members) plan_.pending.push_back(PendingTask{m->id, why, {}});
        return;
      }
    }
    attempt = TryMembers(members, rules.members_per_node, nullptr);
    if (attempt.failed < 0) return Commit(attempt);
    for (const QueuedTask* m : members) {
      PendingTask p = attempt.why;
      p.task_id = m->id;
      plan_.pending.push_back(std::move(p));
    }
  }

  struct GangTry {
    int failed = -1;                 // the member that did not fit (-1: all placed)
    std::vector<Assignment> placed;  // when all were
    PendingTask why;                 // when one was not
  };

  // Places the members in order on nodes `allowed` (null: any) with at most `per_node` (0: any)
  // on one node; undone in full when one does not fit.
  GangTry TryMembers(const std::vector<const QueuedTask*>& members, int per_node,
                     const std::vector<char>* allowed) {
    GangTry out;
    std::vector<MigLayout> journal;  // MIG layouts as they were before a member changed them
    std::vector<int> on_node(static_cast<size_t>(state_.NodeCount()), 0);
    GangRules rules{per_node, allowed, &on_node, 0};
    mig_journal_ = &journal;
    gang_rules_ = &rules;
    for (const QueuedTask* m : members) {
      RejectCounts rejects;
      rules.excluded = 0;
      if (auto a = Place(*m, rejects)) {
        ++on_node[static_cast<size_t>(a->placement.node)];
        out.placed.push_back(std::move(*a));
        continue;
      }
      mig_journal_ = nullptr;
      gang_rules_ = nullptr;
      // Undo in reverse: release the members, then put the MIG layouts back as they were.
      for (auto it = out.placed.rbegin(); it != out.placed.rend(); ++it) {
        (void)state_.Unbind(it->task_id);
      }
      for (auto it = journal.rbegin(); it != journal.rend(); ++it) {
        (void)state_.SetMigLayout(it->node, it->gpu, it->mig_enabled, it->instances);
      }
      std::string prefix = "gang " + m->request.gang_id + ": member " + m->id + " does not fit";
      std::string ruled_out;
      if (rules.excluded > 0) {
        const std::string full = "hold " + std::to_string(per_node) + " member(s) already";
        ruled_out = std::to_string(rules.excluded) + " node(s) that fit " +
                    (allowed == nullptr ? full
                     : per_node > 0     ? "are outside that label value or " + full
                                        : "are outside that label value");
      }
      out.failed = static_cast<int>(out.placed.size());
      out.placed.clear();
      const bool only_rules =
          std::all_of(rejects.counts.begin(), rejects.counts.end(), [](int c) { return c == 0; });
      if (!ruled_out.empty() && only_rules) {
        out.why = PendingTask{m->id, prefix + ": " + ruled_out, {}};
      } else {
        out.why =
            Pending(*m, rejects, prefix + (ruled_out.empty() ? "" : " (" + ruled_out + ")") + ", ");
      }
      return out;
    }
    mig_journal_ = nullptr;
    gang_rules_ = nullptr;
    return out;
  }

  void Commit(GangTry& attempt) {
    for (Assignment& a : attempt.placed) plan_.assignments.push_back(std::move(a));
  }

  // The values of node label `label` and the nodes under each, the values with the most free
  // whole GPUs first (then by value).
  std::vector<std::pair<std::string, std::vector<int>>> TopologyDomains(const std::string& label) {
    std::map<std::string, std::pair<int64_t, std::vector<int>>> by_value;
    for (int n = 0; n < state_.NodeCount(); ++n) {
      const Node& node = state_.node(n);
      auto it = node.labels.find(label);
      if (it == node.labels.end()) continue;
      auto& [free_gpus, nodes] = by_value[it->second];
      for (const Gpu& g : node.gpus) free_gpus += g.Idle() ? 1 : 0;
      nodes.push_back(n);
    }
    std::vector<std::tuple<int64_t, std::string, std::vector<int>>> order;
    for (auto& [value, entry] : by_value) {
      order.emplace_back(-entry.first, value, std::move(entry.second));
    }
    std::sort(order.begin(), order.end());
    std::vector<std::pair<std::string, std::vector<int>>> out;
    for (auto& [free, value, nodes] : order) out.emplace_back(std::move(value), std::move(nodes));
    return out;
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
  std::vector<MigLayout>* mig_journal_ = nullptr;  // set while a gang is being placed
  // While a gang's members are placed: at most `per_node` of them on one node (0: any), only on
  // nodes `allowed` (null: any); `on_node` counts them by node, `excluded` the nodes that would
  // have fit the member being placed but for these rules.
  struct GangRules {
    int per_node;
    const std::vector<char>* allowed;
    const std::vector<int>* on_node;
    int excluded;
  };
  GangRules* gang_rules_ = nullptr;
};

}  // namespace

Plan ScheduleOnce(ClusterState& state, std::span<const QueuedTask> queue, Policy& policy,
                  const ScheduleOptions& options) {
  Plan plan;
  Pass(state, policy, options, plan).Run(queue);
  return plan;
}

}  // namespace gpupool::sched
