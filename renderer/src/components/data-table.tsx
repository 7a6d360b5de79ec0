// The window's one table: columns described once (header, cell, alignment, whether a narrow window may hide
// it), rows with their test ids and data attributes, and a wrapper that keeps a wide table inside its card
// (it scrolls sideways there instead of running out of the card or the window).
import type { HTMLAttributes, ReactNode } from "react";

export interface Column<T> {
  key: string;
  /** The header; a string is shown, `{ hidden: "…" }` only read by screen readers (an actions column). */
  header: string | { hidden: string };
  cell: (row: T) => ReactNode;
  /** "num" (right-aligned figures), "nowrap", "actions". */
  kind?: "num" | "nowrap" | "actions";
  /** Left out below 1000 px, where the window is narrow (its cells say nothing the row cannot spare). */
  narrow?: "hide";
  /** data-testid of the column's cells. */
  testId?: string;
}

type RowAttributes = HTMLAttributes<HTMLTableRowElement> & Record<`data-${string}`, string | undefined>;

export function DataTable<T>({
  rows,
  columns,
  rowKey,
  rowAttributes,
  testId,
  empty,
}: {
  rows: readonly T[];
  columns: ReadonlyArray<Column<T>>;
  rowKey: (row: T) => string;
  rowAttributes?: (row: T) => RowAttributes;
  testId?: string;
  /** Shown as the table's one row when there are no rows. */
  empty?: ReactNode;
}) {
  const classOf = (column: Column<T>) => [column.kind, column.narrow === "hide" ? "hide-narrow" : null].filter(Boolean).join(" ") || undefined;
  return (
    <div className="table-wrap">
      <table data-testid={testId}>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.key} scope="col" className={classOf(column)}>
                {typeof column.header === "string" ? column.header : <span className="sr-only">{column.header.hidden}</span>}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)} {...rowAttributes?.(row)}>
              {columns.map((column) => (
                <td key={column.key} className={classOf(column)} data-testid={column.testId}>
                  {column.cell(row)}
                </td>
              ))}
            </tr>
          ))}
          {rows.length === 0 && empty !== undefined && (
            <tr>
              <td colSpan={columns.length} className="empty">
                {empty}
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
