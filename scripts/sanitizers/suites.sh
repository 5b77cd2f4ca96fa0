# What runs under which sanitizer, sourced by scripts/sanitize.sh (which runs them) and
# scripts/test.sh (which runs the rest of the suite in the normal build, so that each test runs
# once: a C++ test under ASan, what ASan cannot run or what runs none of our C++ in the normal
# build).
# shellcheck shell=bash disable=SC2034

# The tests that exercise C++ under ASan: every ctest but those that run no code of ours (the
# OpenAPI validator and promtool over checked-in files, the SDK's pure and install suites). The
# docker label is in: dockerd starts here and those tests drive DockerRuntime's C++ code.
# Left out, not yet solved (issue 11): the GPU-memory interposer preloaded into a program of this
# build (cudashim_test, and process_runtime_test's one test whose task has it) cannot start there:
# with the dynamic runtime ASan refuses a preloaded library before it, and with the runtime linked
# statically the program dies of SIGSEGV before main (likely the exported dlsym, which the runtime
# calls while it starts; not confirmed). scripts/test.sh runs what is left out here in the normal
# build, so that every test runs once.
asan_exclude='^(openapi_check\.|promtool\.|sdk_python\.(Unit|Install)$|cudashim_test\.|process_runtime_test\.ProcessRuntimeTest\.ATaskHoldingAGpuMemoryShareIsHeldToItByThePreloadedInterposer$)'

# The concurrency tests under TSan: the Controller over the AsyncStore's writer thread (every
# controller_*_test), the stores, the scheduling loop, the HTTP server (HTTPS too) and routes, the
# tunnel, the event hub, the blocking executor, the agent's loop, runners, telemetry, runtime and
# dataset cache (concurrent builds of one version), and the interposer's thread-safe ledger.
tsan_tests=(
  controller_test controller_arrays_test controller_applier_test controller_locks_test
  controller_retention_test controller_join_test controller_sessions_test
  controller_telemetry_test controller_snapshots_test controller_jobs_test controller_volumes_test
  controller_datasets_test
  task_output_test task_files_test metrics_test
  blocking_executor_test event_hub_test
  memory_store_test async_store_test sqlite_store_test
  http_server_test tls_test routes_test tunnel_test file_transfer_test
  agent_test task_runner_test tunnel_agent_test telemetry_test disk_watch_test dataset_cache_test
  process_runtime_test runtime_router_test unix_http_test simulated_probe_test
  ledger_test
)

# Not under TSan, for the reason given above for ASan: the one process_runtime test whose task has
# the GPU-memory interposer preloaded (the interposer's own concurrency, its ledger, is
# ledger_test's, here).
tsan_exclude='^process_runtime_test\.ProcessRuntimeTest\.ATaskHoldingAGpuMemoryShareIsHeldToItByThePreloadedInterposer$'
