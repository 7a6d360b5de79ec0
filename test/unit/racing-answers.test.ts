// The window's lists of files and batches when an action's answer and the pushed stream race
// (renderer/src/state/racing-answers.ts): the copy further along is kept, on a tie the answer's, first in the
// list, and whatever else the list holds when the answer arrives stays.
import { describe, expect, it } from "vitest";
import { batchStage, fileStage, putFirst } from "../../renderer/src/state/racing-answers.js";

type File = { id: string; status: "uploaded" | "processed" | "error" };
type Batch = { id: string; processing_status: "in_progress" | "canceling" | "ended"; succeeded: number };
const file = (id: string, status: File["status"]): File => ({ id, status });
const batch = (id: string, processing_status: Batch["processing_status"], succeeded = 0): Batch => ({ id, processing_status, succeeded });

describe("an action's answer put into a pushed list", () => {
  it("keeps a file the stream brought already read when the upload's answer still says reading", () => {
    expect(putFirst([file("file-a", "processed")], file("file-a", "uploaded"), fileStage)).toEqual([file("file-a", "processed")]);
  });

  it("takes the answer on a tie or when it is further along, first in the list", () => {
    const list = [file("file-b", "processed"), file("file-a", "uploaded")];
    expect(putFirst(list, file("file-a", "error"), fileStage)).toEqual([file("file-a", "error"), file("file-b", "processed")]);
    expect(putFirst(list, file("file-a", "uploaded"), fileStage)).toEqual([file("file-a", "uploaded"), file("file-b", "processed")]);
  });

  it("adds a file not listed yet in front of the list as it is, and starts a list that was not there", () => {
    expect(putFirst([file("file-c", "uploaded")], file("file-b", "processed"), fileStage).map((f) => f.id)).toEqual(["file-b", "file-c"]);
    expect(putFirst(null, file("file-a", "processed"), fileStage)).toEqual([file("file-a", "processed")]);
  });

  it("keeps a batch the stream brought ended over a create or cancel answer; a running one takes the newer answer", () => {
    const ended = [batch("msgbatch_1", "ended", 3)];
    expect(putFirst(ended, batch("msgbatch_1", "in_progress"), batchStage)).toEqual(ended);
    expect(putFirst(ended, batch("msgbatch_1", "canceling"), batchStage)).toEqual(ended);
    expect(putFirst([batch("msgbatch_1", "in_progress", 2)], batch("msgbatch_1", "canceling", 2), batchStage)).toEqual([batch("msgbatch_1", "canceling", 2)]);
    expect(putFirst([batch("msgbatch_1", "in_progress", 0)], batch("msgbatch_1", "in_progress", 1), batchStage)).toEqual([batch("msgbatch_1", "in_progress", 1)]);
  });
});
