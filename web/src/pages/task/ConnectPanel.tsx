// How to reach a running task (docs/api.md "The gateway", "SSH", "Exec"): an Open link for each
// declared port — a signed link the server makes with the user's key (POST …/ports/{port}/link),
// made again before it expires, so a port at an origin of its own (--gateway-domain) opens too —
// and the commands that reach it from a terminal: ssh (with a word on the key it needs), the
// shell, port-forward.
import { useEffect, useState } from "preact/hooks";
import { call } from "../../api/client";
import type { TaskDetail } from "../../api/types.gen";
import { ErrorBox } from "../../components/ui";
import { Link } from "../../router";

// A link works 15 minutes; it is made again after 10.
const kLinkTtlS = 900;
const kRenewMs = 600_000;

function PortLink({ task, port }: { task: string; port: number }) {
  const [url, setUrl] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    const make = () =>
      call("createPortLink", { path: { id: task, port: String(port) }, body: { ttl_s: kLinkTtlS } }).then(
        (l) => live && (setUrl(l.url), setError(null)),
        (e) => live && setError(e),
      );
    make();
    const timer = window.setInterval(make, kRenewMs);
    return () => {
      live = false;
      window.clearInterval(timer);
    };
  }, [task, port]);
  return (
    <li>
      {url ? (
        <a class="btn btn-primary" href={url} target="_blank" rel="noopener noreferrer" data-testid={`task-open-${port}`}>
          Open :{port}
        </a>
      ) : (
        <span class="btn" aria-disabled="true" data-testid={`task-open-${port}`}>
          Open :{port}
        </span>
      )}
      <ErrorBox error={error} testid={`task-open-${port}-error`} />
    </li>
  );
}

export function ConnectPanel({ task }: { task: TaskDetail }) {
  if (task.state !== "running") return null;
  return (
    <section class="panel" aria-labelledby="connect-title" data-testid="task-connect">
      <h2 id="connect-title">Connect</h2>
      {task.ports.length > 0 && (
        <ul class="inline-list" data-testid="task-ports">
          {task.ports.map((p) => (
            <PortLink key={p} task={task.id} port={p} />
          ))}
        </ul>
      )}
      <dl class="facts" data-testid="task-commands">
        <dt>SSH, scp, VS Code</dt>
        <dd>
          <code data-testid="task-ssh-command">ssh {task.id}.gpupool</code>
          <div class="muted">
            Once: add a key on the <Link href="/ssh-keys">SSH keys</Link> page (or <code>gpupool ssh-key add</code>), then <code>gpupool ssh-config &gt;&gt; ~/.ssh/config</code>.
          </div>
        </dd>
        <dt>Shell</dt>
        <dd>
          <code>gpupool shell {task.id}</code>
        </dd>
        {task.ports.length > 0 && (
          <>
            <dt>Port forward</dt>
            <dd>
              <code>
                gpupool port-forward {task.id} {task.ports[0]}
              </code>
            </dd>
          </>
        )}
      </dl>
    </section>
  );
}
