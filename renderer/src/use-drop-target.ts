// Files dropped on a page or a zone of it: the Files, Batches and chat pages take drops the same way.
import { useState, type DragEvent } from "react";

export interface DropTarget {
  /** Files are being dragged over the target (for its highlight). */
  dragging: boolean;
  /** Spread onto the element that takes the drop. */
  handlers: {
    onDragOver(event: DragEvent): void;
    onDragLeave(event: DragEvent): void;
    onDrop(event: DragEvent): void;
  };
}

export function useDropTarget(onFiles: (files: FileList) => void): DropTarget {
  const [dragging, setDragging] = useState(false);
  return {
    dragging,
    handlers: {
      onDragOver(event) {
        // Without this the browser opens the dropped file instead of giving it to the page.
        event.preventDefault();
        setDragging(true);
      },
      onDragLeave(event) {
        // Moving over a child fires dragleave on the target: only leaving the target itself ends the drag,
        // so the highlight does not flicker while the pointer crosses the page's own elements.
        const to = event.relatedTarget;
        if (to instanceof Node && event.currentTarget.contains(to)) return;
        setDragging(false);
      },
      onDrop(event) {
        event.preventDefault();
        setDragging(false);
        if (event.dataTransfer.files.length > 0) onFiles(event.dataTransfer.files);
      },
    },
  };
}
