// A batch's results read in the window: each request's custom_id, how it ended, and its answer (or why it has
// none), with a Download of the JSONL file beside it.
import { useEffect, useRef } from "react";
import type { BatchResultLine } from "../../../server/features/console/wire";
import { DataTable } from "../components/data-table";
import { X } from "../icons";
import { resultText } from "./batches-api";

export function BatchResults({ batchId, lines, onClose }: { batchId: string; lines: BatchResultLine[]; onClose: () => void }) {
  const ref = useRef<HTMLDivElement>(null);
  // Opened from a row far up the list: brought into view, its heading focused for keyboard and screen readers.
  useEffect(() => {
    ref.current?.scrollIntoView({ block: "nearest" });
    ref.current?.querySelector("h2")?.focus({ preventScroll: true });
  }, [batchId]);
  return (
    <div ref={ref} className="card results" data-testid="batch-results" aria-labelledby="batch-results-title">
      <div className="drawer-head">
        <h2 id="batch-results-title" tabIndex={-1}>
          Results of <code>{batchId}</code>
        </h2>
        <button className="icon" aria-label="Close the results" data-testid="batch-results-close" onClick={onClose}>
          <X size={15} aria-hidden />
        </button>
      </div>
      <DataTable
        testId="batch-results-table"
        rows={lines}
        rowKey={(l) => l.custom_id}
        rowAttributes={(l) => ({ "data-testid": "batch-result", "data-custom-id": l.custom_id, "data-result": l.result.type })}
        columns={[
          { key: "id", header: "Request", cell: (l) => <code>{l.custom_id}</code> },
          { key: "result", header: "Result", cell: (l) => <span className={l.result.type === "succeeded" ? undefined : "error"}>{l.result.type}</span> },
          { key: "text", header: "Answer", testId: "batch-result-text", cell: (l) => <div className="result-text">{resultText(l)}</div> },
        ]}
        empty="This batch has no results."
      />
    </div>
  );
}
