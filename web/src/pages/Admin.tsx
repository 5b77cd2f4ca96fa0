// Placeholder until the page is written.
export function Admin(_props: { id?: string }) {
  return <section class="page"><h1>Admin</h1></section>;
}
