// Placeholder until the page is written.
export function Nodes(_props: { id?: string }) {
  return <section class="page"><h1>Nodes</h1></section>;
}
