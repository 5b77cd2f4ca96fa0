// ScheduleOnce (see schedule.h): the placement pipeline over a queue.
#include "sched/schedule.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
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
      if (auto a = Place(t, &rejects)) {
        plan_.assignments.push_back(std::move(*a));
      } else if (auto pre = options_.allow_preemption ? Preempt(t) : std::nullopt) {
        plan_.assignments.push_back(std::move(*pre));
      } else if (auto moved = options_.allow_moves ? MoveFor(t) : std::nullopt) {
        plan_.assignments.push_back(std::move(*moved));
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

  // The node the policy picks among the feasible ones, or -1 (then `rejects` says why, unless it
  // is null: a tentative placement, whose failure nobody reads).
  int PickNode(const RequestView& view, RejectCounts* rejects) {
    RejectCounts unread;
    RejectCounts& counts = rejects != nullptr ? *rejects : unread;
    scanned_ = Candidates(state_, view, counts, candidates_);
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
          counts.Add(r);
        }
      }
    }
    if (gang_rules_ != nullptr) count = ApplyGangRules(feasible, count);
    if (!view.preferred.empty()) count = KeepPreferred(view, feasible, count);
    if (count == 0) {
      if (rejects != nullptr) CountRejects(view, *rejects);
      return -1;
    }
    if (count == 1) return feasible[0];
    int64_t* scores = scores_.Get(count);
    policy_.ScoreNodes(state_, std::span<const int>(feasible, count), view,
                       std::span<int64_t>(scores, count));
    const bool random = policy_.tie_break() == TieBreak::kRandom;
    return feasible[PickTop(std::span<const int64_t>(scores, count), random, policy_.rng())];
  }

  // Keeps the nodes of feasible[0, count) the request prefers when one of them is there (else all
  // of them); returns how many.
  static size_t KeepPreferred(const RequestView& view, int* feasible, size_t count) {
    size_t kept = 0;
    for (size_t i = 0; i < count; ++i) {
      if (std::binary_search(view.preferred.begin(), view.preferred.end(), feasible[i])) {
        std::swap(feasible[kept++], feasible[i]);
      }
    }
    return kept > 0 ? kept : count;
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

  // Places `t` where the policy picks and binds it; nullopt when no node fits (`rejects`, unless
  // null, says why).
  std::optional<Assignment> Place(const QueuedTask& t, RejectCounts* rejects) {
    const RequestView view(state_, t.request);
    const int node = PickNode(view, rejects);
    if (node < 0) return std::nullopt;
    Placement p = policy_.ChooseGpus(state_, node, view);
    if (mig_journal_ != nullptr && p.mig && p.mig->action != MigAction::kUseFree) {
      const Gpu& g = state_.node(node).gpus[static_cast<size_t>(p.gpus[0])];
      mig_journal_->push_back(MigLayout{node, p.gpus[0], g.mig_enabled, g.mig_instances});
    }
    if (auto ok = state_.Bind(t.id, t.request, p); !ok) {
      if (rejects != nullptr) CountRejects(view, *rejects);  // the pending task lists them
      // The policy chose GPUs that do not fit: a bug in the policy, reported, not hidden.
      bind_error_ = "internal error, policy " + std::string(policy_.Name()) +
                    " chose a placement that does not fit: " + ok.error().message;
      return std::nullopt;
    }
    return Assignment{t.id, std::move(p), {}, {}};
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

  // A bound task as a subset search sees it (victims of a preemption, tasks to move): what taking
  // it costs, in GPU milli × ms (the work it loses, or its snapshot and restore), and its GPU.
  struct Candidate {
    const Binding* binding;
    int64_t cost;
    int64_t milli;  // BindingGpuMilli
  };
  // A set's cost, compared in order: Σ cost, number of tasks, Σ GPU milli.
  using SetCost = std::tuple<int64_t, size_t, int64_t>;

  static SetCost CostOf(std::span<const Candidate> set) {
    SetCost c{0, set.size(), 0};
    for (const Candidate& m : set) {
      std::get<0>(c) += m.cost;
      std::get<2>(c) += m.milli;
    }
    return c;
  }

  // The bound tasks of node `n` that `keep` accepts, as candidates of a subset search: the most
  // recently bound first, then stably by cost (the order in which the greedy search takes them).
  template <typename Keep>
  std::vector<Candidate> CandidatesOn(int n, Keep&& keep) const {
    std::vector<Candidate> out;
    const Node& node = state_.node(n);
    for (const std::string& id : state_.TasksOn(n)) {
      const Binding* b = state_.FindBinding(id);
      if (!keep(*b)) continue;
      const int64_t milli = BindingGpuMilli(node, *b);
      out.push_back(Candidate{b, milli * WorkLostMs(b->work, options_.now_ms), milli});
    }
    std::reverse(out.begin(), out.end());
    std::stable_sort(out.begin(), out.end(),
                     [](const Candidate& a, const Candidate& b) { return a.cost < b.cost; });
    return out;
  }

  // Cheapest set of strictly lower-priority tasks on one node whose release lets `t` fit there.
  // Cost, compared in order: highest victim priority, the work they lose (GPU milli × ms since
  // their last snapshot, or of snapshot and restore, WorkLostMs), number of victims, their GPU
  // milli, node. The search only asks "would it fit?" of node copies (FitsAfterRelease); the state
  // changes only once the winner is known.
  std::optional<Assignment> Preempt(const QueuedTask& t) {
    const int priority = t.request.priority;
    if (priority <= kMinPriority) return std::nullopt;
    const RequestView view(state_, t.request);
    using Cost = std::tuple<int, SetCost, int>;
    std::optional<Cost> best_cost;
    std::vector<Candidate> best_victims;
    RejectCounts ignored;
    for (const int n : Candidates(state_, view, ignored, candidates_)) {
      if (!state_.node(n).schedulable) continue;
      auto victims = CheapestVictims(n, t.request, CandidatesOn(n, [&](const Binding& b) {
                                       return b.request.priority < priority;
                                     }));
      if (!victims) continue;
      int top = 0;
      for (const Candidate& v : *victims) top = std::max(top, v.binding->request.priority);
      const Cost cost{top, CostOf(*victims), n};
      if (!best_cost || cost < *best_cost) {
        best_cost = cost;
        best_victims = std::move(*victims);
      }
    }
    if (!best_cost) return std::nullopt;
    const int node = std::get<2>(*best_cost);
    Assignment a{t.id, {}, {}, {}};
    std::vector<Binding> released;
    for (const Candidate& v : best_victims) {
      const Binding& b = *v.binding;
      released.push_back(b);
      a.preempted.push_back(b.task_id);
      plan_.preemptions.push_back(
          Preemption{b.task_id, t.id,
                     b.task_id + " (priority " + std::to_string(b.request.priority) +
                         ") preempted by " + t.id + " (priority " + std::to_string(priority) +
                         ") to fit on " + state_.node(node).name + LossNote(b.work, v.cost)});
    }
    for (const Binding& v : released) (void)state_.Unbind(v.task_id);
    a.placement = policy_.ChooseGpus(state_, node, view);
    if (!state_.Bind(t.id, t.request, a.placement)) {
      // Cannot happen after FitsAfterRelease said yes; undo rather than leave victims stopped.
      for (const Binding& v : released) {
        (void)state_.Bind(v.task_id, v.request, v.placement, v.work);
      }
      plan_.preemptions.resize(plan_.preemptions.size() - released.size());
      return std::nullopt;
    }
    return a;
  }

  // What a victim loses, for its reason: "" when the state does not know.
  static std::string LossNote(const WorkState& work, int64_t cost) {
    if (work.snapshot_on_stop) {
      return "; snapshotted first: " + GpuSeconds(cost) + " GPU-s to snapshot and restore";
    }
    if (work.unsaved_since_ms <= 0) return "";
    return "; " + GpuSeconds(cost) + " GPU-s of work since its last snapshot (or start)";
  }

  // GPU milli × ms as GPU-seconds for people: whole above 10, one decimal below.
  static std::string GpuSeconds(int64_t milli_ms) {
    const double s = static_cast<double>(milli_ms) / 1e6;
    char buf[32];
    std::snprintf(buf, sizeof buf, s >= 10 ? "%.0f" : "%.1f", s);
    return buf;
  }

  // Move instead of kill (ScheduleOptions::allow_moves): the cheapest set of movable tasks on one
  // node whose leaving lets `t` fit there while each of them fits another node now; cost, in
  // order: GPU milli × ms of their snapshots and restores, number of tasks, their GPU milli, node.
  // Tentative placements of the movers (PlaceElsewhere) are undone; the winner's movers are then
  // bound where they were found to fit, with their unsaved work starting now (they resume from the
  // snapshot taken on leaving), and `t` on the node they leave.
  std::optional<Assignment> MoveFor(const QueuedTask& t) {
    const RequestView view(state_, t.request);
    using Cost = std::tuple<SetCost, int>;
    std::optional<Cost> best_cost;
    std::vector<Candidate> best_movers;
    std::vector<Placement> best_to;
    RejectCounts ignored;
    // The nodes where moves may make room, each with the least any set of its tasks costs,
    // cheapest first: once the best set found costs less than a node's least, neither it nor any
    // later node can win. (A copy of the candidates: placing movers scans candidates again.)
    struct Site {
      Cost least;
      std::vector<Candidate> movable;
    };
    std::vector<Site> sites;
    const auto span = Candidates(state_, view, ignored, candidates_);
    const std::vector<int> nodes(span.begin(), span.end());
    ShapeFits shapes;
    for (const int n : nodes) {
      if (!state_.node(n).schedulable) continue;
      // A task that fits no other node alone fits none in a set either (the set's others only
      // take room there).
      std::vector<Candidate> movable = CandidatesOn(n, [&](const Binding& b) {
        if (!b.work.snapshot_on_stop || b.request.gang_size > 1 ||
            (b.request.priority > t.request.priority && !options_.move_any_priority)) {
          return false;
        }
        const Fits fits = FitsNow(b.request, shapes);
        return fits.count == 2 || (fits.count == 1 && fits.first != n);
      });
      if (movable.empty() || !MayFitAfterRelease(n, t.request, movable)) continue;
      // CandidatesOn sorts by cost: the first is the cheapest.
      sites.push_back(Site{Cost{SetCost{movable.front().cost, 1, 0}, n}, std::move(movable)});
    }
    std::sort(sites.begin(), sites.end(),
              [](const Site& a, const Site& b) { return a.least < b.least; });
    for (const Site& site : sites) {
      if (best_cost && site.least > *best_cost) break;
      const int n = std::get<1>(site.least);
      if (!FitsAfterRelease(n, t.request, site.movable)) continue;
      // Only sets cheaper than the best so far can win; on a lower node, as cheap ones too (the
      // Σ milli is an integer: below milli + 1 is at most milli).
      std::optional<SetCost> ceiling;
      if (best_cost) {
        ceiling = std::get<0>(*best_cost);
        if (n < std::get<1>(*best_cost)) ++std::get<2>(*ceiling);
      }
      std::vector<Placement> to;
      auto movers = CheapestSubset(site.movable, ceiling, [&](std::span<const Candidate> set) {
        if (!FitsAfterRelease(n, t.request, set)) return false;
        auto placed = PlaceElsewhere(n, set);
        if (placed) to = std::move(*placed);
        return placed.has_value();
      });
      if (!movers) continue;
      const Cost cost{CostOf(*movers), n};
      if (best_cost && !(cost < *best_cost)) continue;  // as cheap, on a later node
      best_cost = cost;
      best_movers = std::move(*movers);
      best_to = std::move(to);
    }
    if (!best_cost) return std::nullopt;
    const int node = std::get<1>(*best_cost);
    std::vector<Binding> left;
    for (const Candidate& m : best_movers) left.push_back(*m.binding);
    for (const Binding& m : left) (void)state_.Unbind(m.task_id);
    size_t bound = 0;
    for (; bound < left.size(); ++bound) {
      WorkState resumed = left[bound].work;
      if (options_.now_ms > 0) resumed.unsaved_since_ms = options_.now_ms;
      if (!state_.Bind(left[bound].task_id, left[bound].request, best_to[bound], resumed)) break;
    }
    Assignment a{t.id, {}, {}, {}};
    if (bound == left.size()) {
      a.placement = policy_.ChooseGpus(state_, node, view);
      if (state_.Bind(t.id, t.request, a.placement)) {
        for (size_t i = 0; i < left.size(); ++i) {
          const Binding& m = left[i];
          const Placement& to = best_to[i];
          a.moved.push_back(m.task_id);
          plan_.moves.push_back(Move{m.task_id, node, to, t.id,
                                     m.task_id + " moved from " + state_.node(node).name + " to " +
                                         state_.node(to.node).name + " to make room for " + t.id +
                                         "; " + GpuSeconds(best_movers[i].cost) +
                                         " GPU-s to snapshot and restore"});
        }
        return a;
      }
    }
    // Cannot happen after the tentative placements fitted; undo rather than leave tasks unbound.
    for (size_t i = bound; i-- > 0;) (void)state_.Unbind(left[i].task_id);
    for (const Binding& m : left) (void)state_.Bind(m.task_id, m.request, m.placement, m.work);
    return std::nullopt;
  }

  // Places `movers` (bound on node `n`) one after another, largest first, on nodes other than `n`
  // as the policy would, under tentative ids, and undoes it; returns their placements (in the
  // order of `movers`), or nullopt when one fits nowhere else.
  std::optional<std::vector<Placement>> PlaceElsewhere(int n, std::span<const Candidate> movers) {
    std::vector<size_t> order(movers.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return movers[a].milli > movers[b].milli; });
    std::vector<char> allowed(static_cast<size_t>(state_.NodeCount()), 1);
    allowed[static_cast<size_t>(n)] = 0;
    GangRules rules{0, &allowed, nullptr, 0};
    std::vector<MigLayout> journal;
    std::vector<std::string> placed_ids;
    std::vector<Placement> to(movers.size());
    mig_journal_ = &journal;
    gang_rules_ = &rules;
    bool all = true;
    for (const size_t i : order) {
      // A name no real task has (ids have no spaces), so that the mover's own binding stays.
      const QueuedTask tentative{movers[i].binding->task_id + " (moving)",
                                 movers[i].binding->request};
      auto a = Place(tentative, nullptr);
      if (!a) {
        all = false;
        break;
      }
      placed_ids.push_back(tentative.id);
      to[i] = std::move(a->placement);
    }
    mig_journal_ = nullptr;
    gang_rules_ = nullptr;
    Undo(placed_ids, journal);
    if (!all) return std::nullopt;
    return to;
  }

  // Where `r` fits now, by CheckNode: how many nodes (counted up to 2) and the first of them.
  // A task to move fits a node other than its own exactly when there are two, or one that is not
  // its own. Asked once per request shape in a move search (`shapes`), in which the state is the
  // same between tentative placements.
  struct Fits {
    int count = 0;
    int first = -1;
  };
  struct ShapeHash {
    size_t operator()(const TaskRequest& r) const {
      return std::hash<int64_t>()(r.cpu_milli * 31 + r.memory_mib) ^
             std::hash<int64_t>()(r.gpu_count * 1009 + r.gpu_milli);
    }
  };
  using ShapeFits = std::unordered_map<TaskRequest, Fits, ShapeHash>;

  Fits FitsNow(const TaskRequest& r, ShapeFits& shapes) {
    const auto [it, fresh] = shapes.try_emplace(r);
    if (!fresh) return it->second;
    const RequestView view(state_, r);
    RejectCounts unread;
    std::vector<int> scratch;
    for (const int n : Candidates(state_, view, unread, scratch)) {
      if (CheckNode(state_, n, view) != Reject::kNone) continue;
      if (it->second.first < 0) it->second.first = n;
      if (++it->second.count == 2) break;
    }
    return it->second;
  }

  // A cheap necessary condition of FitsAfterRelease: what node `n` has free and `released` hold
  // covers the request's CPU, memory and GPU milli in sum.
  bool MayFitAfterRelease(int n, const TaskRequest& r, std::span<const Candidate> released) const {
    const NodeSummary& s = state_.summary(n);
    int64_t cpu = s.cpu_free_milli;
    int64_t memory = s.memory_free_mib;
    int64_t milli = s.gpu_milli_left;
    for (const Candidate& c : released) {
      cpu += c.binding->request.cpu_milli;
      memory += c.binding->request.memory_mib;
      milli += c.milli;
    }
    return cpu >= r.cpu_milli && memory >= r.memory_mib && milli >= r.GpuMilli();
  }

  // Whether `r` fits node `n` once `released` have given back what they hold, decided on a copy
  // of the node in a one-node state.
  bool FitsAfterRelease(int n, const TaskRequest& r, std::span<const Candidate> released) {
    Node copy = state_.node(n);
    for (const Candidate& c : released) ApplyToNode(copy, *c.binding, -1);
    const ClusterState one(std::vector<Node>{std::move(copy)});
    return CheckNode(one, 0, RequestView(one, r)) == Reject::kNone;
  }

  // The cheapest victims on node `n` among `lower` (tasks of lower priority than `r`'s, in
  // CandidatesOn's order), or nullopt when even all of them are not enough. Priority levels are
  // tried from the lowest: the first level whose tasks (with all lower ones) make room sets the
  // top victim priority; within it the cheapest set by SetCost (CheapestSubset).
  std::optional<std::vector<Candidate>> CheapestVictims(int n, const TaskRequest& r,
                                                        std::vector<Candidate> lower) {
    std::stable_sort(lower.begin(), lower.end(), [](const Candidate& a, const Candidate& b) {
      return a.binding->request.priority < b.binding->request.priority;
    });
    for (size_t level_end = 0; level_end < lower.size();) {
      const int level = lower[level_end].binding->request.priority;
      while (level_end < lower.size() && lower[level_end].binding->request.priority == level) {
        ++level_end;
      }
      const std::span<const Candidate> pool(lower.data(), level_end);
      if (!FitsAfterRelease(n, r, pool)) continue;
      return CheapestSubset(pool, std::nullopt, [&](std::span<const Candidate> set) {
        // A set without this level is one of lower levels alone, which were not enough.
        return std::any_of(
                   set.begin(), set.end(),
                   [&](const Candidate& c) { return c.binding->request.priority == level; }) &&
               FitsAfterRelease(n, r, set);
      });
    }
    return std::nullopt;
  }

  // The cheapest subset of `pool` by SetCost that `accept` takes, below `ceiling` when given (the
  // first found among equals: by size, then in lexicographic order of positions), or nullopt.
  // `accept` is asked only of sets cheaper than the best so far, which it then becomes. Subsets
  // are tried in increasing size until even the cheapest costs of the next size cannot win. Beyond
  // kMaxExact tasks the subsets are too many: take them in pool order until `accept` takes the
  // set, then give back every one it does not need.
  template <typename Accept>
  static std::optional<std::vector<Candidate>> CheapestSubset(std::span<const Candidate> pool,
                                                              std::optional<SetCost> ceiling,
                                                              Accept&& accept) {
    constexpr size_t kMaxExact = 12;
    if (pool.size() > kMaxExact) {
      std::vector<Candidate> set;
      bool taken = false;
      for (const Candidate& c : pool) {
        set.push_back(c);
        if ((taken = accept(std::span<const Candidate>(set)))) break;
      }
      if (!taken) return std::nullopt;
      for (size_t i = set.size(); i-- > 0;) {
        std::vector<Candidate> without = set;
        without.erase(without.begin() + static_cast<long>(i));
        if (accept(std::span<const Candidate>(without))) set = std::move(without);
      }
      if (ceiling && !(CostOf(set) < *ceiling)) return std::nullopt;
      return set;
    }
    std::vector<int64_t> least(pool.size() + 1, 0);  // least[k]: Σ of the k smallest costs
    std::vector<int64_t> costs;
    for (const Candidate& c : pool) costs.push_back(c.cost);
    std::sort(costs.begin(), costs.end());
    for (size_t k = 0; k < costs.size(); ++k) least[k + 1] = least[k] + costs[k];
    std::optional<std::vector<Candidate>> best;
    std::optional<SetCost> bound = ceiling;
    for (size_t k = 1; k <= pool.size(); ++k) {
      if (bound && std::pair(least[k], k) > std::pair(std::get<0>(*bound), std::get<1>(*bound))) {
        break;
      }
      ForEachSubset(pool, k, [&](const std::vector<Candidate>& subset) {
        const SetCost cost = CostOf(subset);
        if (bound && !(cost < *bound)) return;
        if (accept(std::span<const Candidate>(subset))) {
          best = subset;
          bound = cost;
        }
      });
    }
    return best;
  }

  // Calls fn with every k-element subset of `pool`, in lexicographic order of positions.
  template <typename F>
  static void ForEachSubset(std::span<const Candidate> pool, size_t k, F&& fn) {
    std::vector<size_t> idx(k);
    for (size_t i = 0; i < k; ++i) idx[i] = i;
    std::vector<Candidate> subset(k);
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
      const std::string why = "gang " + gang_id +
                              " waits for its members: " + std::to_string(members.size()) + " of " +
                              std::to_string(size) + " queued";
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
      if (auto a = Place(*m, &rejects)) {
        ++on_node[static_cast<size_t>(a->placement.node)];
        out.placed.push_back(std::move(*a));
        continue;
      }
      mig_journal_ = nullptr;
      gang_rules_ = nullptr;
      std::vector<std::string> placed_ids;
      for (const Assignment& a : out.placed) placed_ids.push_back(a.task_id);
      Undo(placed_ids, journal);
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
  Scratch<int> feasible_;    // PickNode: the nodes that fit, ascending
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
  // Set while a gang's members or the tasks of a move are placed tentatively.
  std::vector<MigLayout>* mig_journal_ = nullptr;
  // While a gang's members are placed: at most `per_node` of them on one node (0: any; then
  // `on_node` may be null), only on nodes `allowed` (null: any); `on_node` counts them by node,
  // `excluded` the nodes that would have fit the member being placed but for these rules. The
  // tasks of a move are placed with `allowed` alone: every node but the one they leave.
  struct GangRules {
    int per_node;
    const std::vector<char>* allowed;
    const std::vector<int>* on_node;
    int excluded;
  };
  GangRules* gang_rules_ = nullptr;

  // Undoes tentative placements: releases `ids`, then puts back the MIG layouts `journal` noted
  // before they changed, both in reverse order.
  void Undo(const std::vector<std::string>& ids, const std::vector<MigLayout>& journal) {
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) (void)state_.Unbind(*it);
    for (auto it = journal.rbegin(); it != journal.rend(); ++it) {
      (void)state_.SetMigLayout(it->node, it->gpu, it->mig_enabled, it->instances);
    }
  }
};

}  // namespace

Plan ScheduleOnce(ClusterState& state, std::span<const QueuedTask> queue, Policy& policy,
                  const ScheduleOptions& options) {
  Plan plan;
  Pass(state, policy, options, plan).Run(queue);
  return plan;
}

}  // namespace gpupool::sched
