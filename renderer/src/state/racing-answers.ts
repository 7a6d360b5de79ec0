// An action's answer and the window's pushed stream race: the stream may bring a file already read, or a
// batch already ended, before the upload's or the batch's own answer arrives. The stream sends only what
// changed, so an answer put over it afterwards would stay ("reading…" for good). Each item keeps whichever copy
// is further along (on a tie, the answer's). Pure, so the tests import it as it is (no imports of its own).

/** How far along a file is: read or refused is final. */
export function fileStage(file: { status: "uploaded" | "processed" | "error" }): number {
  return file.status === "uploaded" ? 0 : 1;
}

/** How far along a batch is: running, then canceling, then ended. */
export function batchStage(batch: { processing_status: "in_progress" | "canceling" | "ended" }): number {
  return batch.processing_status === "ended" ? 2 : batch.processing_status === "canceling" ? 1 : 0;
}

/** The list with `item` first: the listed copy of it stays where that one is further along. */
export function putFirst<T extends { id: string }>(list: readonly T[] | null, item: T, stage: (x: T) => number): T[] {
  const listed = list?.find((x) => x.id === item.id);
  const kept = listed && stage(listed) > stage(item) ? listed : item;
  return [kept, ...(list ?? []).filter((x) => x.id !== item.id)];
}
