// The console's shell: recovers the session (or shows the login page), the navigation, the
// live connection's status, and the route table — /login, / (overview), /tasks, /tasks/new,
// /tasks/:id, /volumes, /datasets, /nodes, /billing, /ssh-keys, /admin. A 401 from any request ends the session here and
// returns to the login page, which comes back to where the user was after logging in.
import { useEffect, useState } from "preact/hooks";
import { setUnauthenticatedHandler } from "./api/client";
import { liveStatus, startLive, stopLive } from "./api/live";
import { dropSession, logout, restoreSession, session } from "./api/session";
import { ErrorBox, Loading } from "./components/ui";
import { useStore } from "./lib/store";
import { Admin } from "./pages/Admin";
import { Billing } from "./pages/Billing";
import { CreateTask } from "./pages/CreateTask";
import { Datasets } from "./pages/Datasets";
import { Login } from "./pages/Login";
import { Nodes } from "./pages/Nodes";
import { Overview } from "./pages/Overview";
import { SshKeys } from "./pages/SshKeys";
import { TaskPage } from "./pages/TaskPage";
import { Tasks } from "./pages/Tasks";
import { Volumes } from "./pages/Volumes";
import { Link, matchRoute, navigate, useLocation } from "./router";

setUnauthenticatedHandler(() => {
  stopLive();
  dropSession();
  const here = window.location.pathname + window.location.search;
  if (window.location.pathname !== "/login") navigate(`/login?next=${encodeURIComponent(here)}`, true);
});

const kNav: Array<{ href: string; label: string; admin?: boolean }> = [
  { href: "/", label: "Overview" },
  { href: "/tasks", label: "Tasks" },
  { href: "/tasks/new", label: "Create task" },
  { href: "/volumes", label: "Volumes" },
  { href: "/datasets", label: "Datasets" },
  { href: "/nodes", label: "Nodes", admin: true },
  { href: "/billing", label: "Billing" },
  { href: "/ssh-keys", label: "SSH keys" },
  { href: "/admin", label: "Admin", admin: true },
];

function Page({ path }: { path: string }) {
  if (matchRoute("/", path)) return <Overview />;
  if (matchRoute("/tasks", path)) return <Tasks />;
  if (matchRoute("/tasks/new", path)) return <CreateTask />;
  const task = matchRoute("/tasks/:id", path);
  if (task) return <TaskPage id={task.id} />;
  if (matchRoute("/volumes", path)) return <Volumes />;
  if (matchRoute("/datasets", path)) return <Datasets />;
  if (matchRoute("/nodes", path)) return <Nodes />;
  if (matchRoute("/billing", path)) return <Billing />;
  if (matchRoute("/ssh-keys", path)) return <SshKeys />;
  if (matchRoute("/admin", path)) return <Admin />;
  return (
    <section class="page" data-testid="page-not-found">
      <h1>Not found</h1>
      <p>
        There is no page at <code>{path}</code>. <Link href="/">Go to the overview</Link>.
      </p>
    </section>
  );
}

const kTitles: Record<string, string> = { off: "offline", connecting: "connecting…", live: "live", reconnecting: "reconnecting…" };

export function App() {
  const s = useStore(session);
  const loc = useLocation();
  const live = useStore(liveStatus);
  const [bootError, setBootError] = useState<unknown>(null);
  const [menuOpen, setMenuOpen] = useState(false);

  useEffect(() => {
    restoreSession().catch(setBootError);
  }, []);
  // After the page's own effects (they say what they watch), so the first stream carries it.
  useEffect(() => {
    if (s && loc.path !== "/login") startLive();
  }, [s, loc.path]);
  useEffect(() => {
    if (s === null && loc.path !== "/login") navigate(`/login?next=${encodeURIComponent(loc.path + window.location.search)}`, true);
    if (s && loc.path === "/login") navigate(loc.query.get("next") || "/", true);
    setMenuOpen(false);
  }, [s, loc.path]);

  if (bootError) return <ErrorBox error={bootError} testid="boot-error" />;
  if (loc.path === "/login") return <Login />;
  if (!s) return <Loading what="your session" />;

  const isAdmin = s.role === "admin";
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href="/" class="brand">
          gpupool
        </Link>
        <button type="button" class="menu-toggle" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen(!menuOpen)} data-testid="nav-toggle">
          Menu
        </button>
        <nav id="nav" class={menuOpen ? "nav nav-open" : "nav"} aria-label="Main" data-testid="nav">
          {kNav
            .filter((n) => !n.admin || isAdmin)
            .map((n) => {
              const active = n.href === "/" ? loc.path === "/" : n.href === "/tasks" ? loc.path === "/tasks" || (loc.path.startsWith("/tasks/") && loc.path !== "/tasks/new") : loc.path === n.href;
              return (
                <Link key={n.href} href={n.href} class={active ? "active" : undefined} aria-current={active ? "page" : undefined} data-testid={`nav-${n.label.toLowerCase().replace(/ /g, "-")}`}>
                  {n.label}
                </Link>
              );
            })}
        </nav>
        <span class={`live live-${live}`} data-testid="live-status" data-status={live} title="The live event stream">
          {kTitles[live]}
        </span>
        <span class="whoami" data-testid="whoami">
          {s.user_id} <span class="role">{s.role}</span>
        </span>
        <button
          type="button"
          class="btn btn-plain"
          data-testid="logout"
          onClick={() => {
            stopLive();
            logout().finally(() => navigate("/login", true));
          }}
        >
          Log out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <Page path={loc.path} />
      </main>
    </div>
  );
}
