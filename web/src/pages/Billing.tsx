// Placeholder until the page is written.
export function Billing(_props: { id?: string }) {
  return <section class="page"><h1>Billing</h1></section>;
}
