// Placeholder until the page is written.
export function TaskPage(_props: { id?: string }) {
  return <section class="page"><h1>TaskPage</h1></section>;
}
