import { describe, expect, it } from "vitest";
import { resolveServeConfig } from "../../server/config.js";
import {
  addedHugeSpans,
  adviseHugePages,
  anonymousRegions,
  HUGE_PAGE_BYTES,
  parseMmapSetting,
  ramForWeights,
  transparentHugePageMode,
  useMmapFor,
  type Madvise,
} from "../../server/engine/huge-pages.js";

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

describe("useMmapFor", () => {
  const base = { setting: "auto" as const, platform: "linux" as const, hugePages: "madvise" as const, onCpu: true, modelBytes: 4 * GiB, ramFreeBytes: 20 * GiB, ramTotalBytes: 24 * GiB };

  it("reads a model that fits into memory on Linux on the CPU, where there are transparent huge pages", () => {
    expect(useMmapFor(base)).toBe(false);
    expect(useMmapFor({ ...base, hugePages: "always" })).toBe(false);
    expect(useMmapFor({ ...base, hugePages: "never" })).toBe(true);
    expect(useMmapFor({ ...base, hugePages: undefined })).toBe(true);
    expect(useMmapFor({ ...base, hugePages: "never", setting: "off" })).toBe(false);
  });

  it("maps the file on a GPU, on other systems, and when asked", () => {
    expect(useMmapFor({ ...base, onCpu: false })).toBe(true);
    expect(useMmapFor({ ...base, platform: "darwin" })).toBe(true);
    expect(useMmapFor({ ...base, platform: "win32" })).toBe(true);
    expect(useMmapFor({ ...base, setting: "on" })).toBe(true);
    expect(useMmapFor({ ...base, setting: "off", platform: "darwin", onCpu: false })).toBe(false);
  });

  it("maps a model that would take more than 80% of the memory left after the planner's reserve", () => {
    // 24 GiB total: reserve 2.4 GiB; 8 GiB free leaves 5.6 GiB, of which 80% is 4.48 GiB.
    expect(useMmapFor({ ...base, ramFreeBytes: 8 * GiB, modelBytes: 4.4 * GiB })).toBe(false);
    expect(useMmapFor({ ...base, ramFreeBytes: 8 * GiB, modelBytes: 4.6 * GiB })).toBe(true);
    // Less free than the reserve: always mapped.
    expect(useMmapFor({ ...base, ramFreeBytes: 1 * GiB, modelBytes: 10 * MiB })).toBe(true);
  });
});

describe("ramForWeights", () => {
  it("is the machine's RAM without a container limit, or with one above it", () => {
    const machine = { freeBytes: 20 * GiB, totalBytes: 24 * GiB, rssBytes: 1 * GiB };
    expect(ramForWeights({ ...machine, limitBytes: undefined })).toEqual({ freeBytes: 20 * GiB, totalBytes: 24 * GiB });
    // Node reports 2^64 where there is no cgroup limit.
    expect(ramForWeights({ ...machine, limitBytes: 2 ** 64 })).toEqual({ freeBytes: 20 * GiB, totalBytes: 24 * GiB });
  });

  it("is a container's limit less what the process holds, where the limit is lower", () => {
    const r = ramForWeights({ freeBytes: 20 * GiB, totalBytes: 24 * GiB, limitBytes: 4 * GiB, rssBytes: 1 * GiB });
    expect(r).toEqual({ freeBytes: 3 * GiB, totalBytes: 4 * GiB });
    // A 3 GiB model then stays mapped: 80% of (3 GiB - 1 GiB reserve) is 1.6 GiB.
    expect(useMmapFor({ setting: "auto", platform: "linux", hugePages: "madvise", onCpu: true, modelBytes: 3 * GiB, ramFreeBytes: r.freeBytes, ramTotalBytes: r.totalBytes })).toBe(true);
    expect(ramForWeights({ freeBytes: 20 * GiB, totalBytes: 24 * GiB, limitBytes: 1 * GiB, rssBytes: 2 * GiB }).freeBytes).toBe(0);
  });
});

describe("parseMmapSetting", () => {
  it("takes auto, on and off and their usual spellings, and nothing else", () => {
    expect(parseMmapSetting("auto")).toBe("auto");
    expect(parseMmapSetting(" ON ")).toBe("on");
    expect(parseMmapSetting("1")).toBe("on");
    expect(parseMmapSetting("off")).toBe("off");
    expect(parseMmapSetting("false")).toBe("off");
    expect(parseMmapSetting("")).toBeUndefined();
    expect(parseMmapSetting(undefined)).toBeUndefined();
    expect(parseMmapSetting("sometimes")).toBeUndefined();
  });

  it("is read from --mmap, then SVC_MMAP; auto without either; anything else stops the server with a message", () => {
    expect(resolveServeConfig({}, {}).mmap).toBe("auto");
    expect(resolveServeConfig({}, { SVC_MMAP: "" }).mmap).toBe("auto");
    expect(resolveServeConfig({}, { SVC_MMAP: "on" }).mmap).toBe("on");
    expect(resolveServeConfig({ mmap: "off" }, { SVC_MMAP: "on" }).mmap).toBe("off");
    expect(() => resolveServeConfig({ mmap: "maybe" }, {})).toThrow("--mmap must be auto, on or off (got 'maybe').");
  });
});

const MAPS = `55d0c0a00000-55d0c0c00000 r--p 00000000 fe:01 1234   /usr/bin/node
55d0c4000000-55d0c8000000 rw-p 00000000 00:00 0      [heap]
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
7f0000400000-7f0006a00000 rw-p 00000000 00:00 0
7f0006a00000-7f000d000000 r--p 00000000 fe:01 99     /models/model.gguf
7f000d000000-7f000d001000 ---p 00000000 00:00 0
7f000d001000-7f000d801000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0      [stack]
`;

describe("anonymousRegions", () => {
  it("keeps private writable anonymous mappings only: no files, heap, stack or guard pages", () => {
    expect(anonymousRegions(MAPS)).toEqual([
      { start: 0x7f0000000000n, end: 0x7f0000400000n },
      { start: 0x7f0000400000n, end: 0x7f0006a00000n },
      { start: 0x7f000d001000n, end: 0x7f000d801000n },
    ]);
  });
});

describe("addedHugeSpans", () => {
  it("takes the whole huge pages of large regions a load added", () => {
    const before = [{ start: 0x7f0000000000n, end: 0x7f0000400000n }];
    const after = [
      ...before,
      // Not aligned at either end: 0x...0400000 + 1 MiB, up to 0x...6a00000 - 4 KiB.
      { start: 0x7f0000500000n, end: 0x7f0006a00000n - 0x1000n },
      // Too small to be a model's buffer.
      { start: 0x7f0010000000n, end: 0x7f0010200000n },
    ];
    const spans = addedHugeSpans(before, after, 8 * MiB);
    expect(spans).toEqual([{ start: 0x7f0000600000n, end: 0x7f0006800000n }]);
    for (const s of spans) {
      expect(s.start % BigInt(HUGE_PAGE_BYTES)).toBe(0n);
      expect(s.end % BigInt(HUGE_PAGE_BYTES)).toBe(0n);
    }
  });

  it("finds nothing when nothing new is large enough to hold a huge page", () => {
    const r = { start: 0x7f0000100000n, end: 0x7f0000300000n };
    expect(addedHugeSpans([], [r], 0)).toEqual([]);
    expect(addedHugeSpans([r], [r], 0)).toEqual([]);
  });
});

describe("adviseHugePages", () => {
  it("asks for huge pages, then collapses them one at a time, and counts what collapsed", async () => {
    const calls: [bigint, bigint, number][] = [];
    const madvise: Madvise = async (s, l, a) => (calls.push([s, l, a]), 0);
    const spans = [{ start: 0x200000n, end: 0x800000n }];
    expect(await adviseHugePages(spans, madvise)).toBe(6 * MiB);
    expect(calls).toEqual([
      [0x200000n, 0x600000n, 14],
      [0x200000n, 0x200000n, 25],
      [0x400000n, 0x200000n, 25],
      [0x600000n, 0x200000n, 25],
    ]);
  });

  it("counts only the pages that collapsed, and none where the advice is refused", async () => {
    const spans = [{ start: 0x200000n, end: 0x800000n }];
    // Before Linux 6.1 there is no MADV_COLLAPSE; a page freed meanwhile fails alone.
    expect(await adviseHugePages(spans, (_s, _l, a) => (a === 25 ? -1 : 0))).toBe(0);
    expect(await adviseHugePages(spans, (s, _l, a) => (a === 25 && s === 0x400000n ? -1 : 0))).toBe(4 * MiB);
    const calls: number[] = [];
    expect(await adviseHugePages(spans, (_s, _l, a) => (calls.push(a), -1))).toBe(0);
    expect(calls).toEqual([14]);
  });
});

describe("the system's state", () => {
  it("reads the THP mode", () => {
    expect(transparentHugePageMode(() => "always defer [madvise] never")).toBe("madvise");
    expect(transparentHugePageMode(() => "always [never]")).toBe("never");
    expect(transparentHugePageMode(() => {
      throw new Error("ENOENT");
    })).toBeUndefined();
  });
});
