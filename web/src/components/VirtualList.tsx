// A virtualised list of fixed-height rows: only the rows in view (plus a margin) are in the DOM,
// so a list of 10,000 tasks scrolls and updates as fast as one of 50.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

export function VirtualList<T>(props: {
  items: T[];
  rowHeight: number;
  height: number;
  render: (item: T, index: number) => ComponentChildren;
  testid: string;
  label: string;
}) {
  const [top, setTop] = useState(0);
  const { items, rowHeight, height } = props;
  const first = Math.max(0, Math.floor(top / rowHeight) - 10);
  const last = Math.min(items.length, Math.ceil((top + height) / rowHeight) + 10);

  const rows: ComponentChildren[] = [];
  for (let i = first; i < last; i++) rows.push(props.render(items[i], i));
  return (
    <div
      class="vlist"
      style={{ height: `${height}px` }}
      onScroll={(e) => setTop((e.currentTarget as HTMLDivElement).scrollTop)}
      data-testid={props.testid}
      data-rows={items.length}
      role="rowgroup"
      aria-label={props.label}
      tabIndex={0}
    >
      <div class="vlist-inner" style={{ height: `${items.length * rowHeight}px` }}>
        <div class="vlist-rows" style={{ transform: `translateY(${first * rowHeight}px)` }}>
          {rows}
        </div>
      </div>
    </div>
  );
}
