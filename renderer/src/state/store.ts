// A small external store (the node-llama-cpp Electron template's pattern): state lives outside React, is
// replaced immutably, and components subscribe to the part they show with a selector, so a change elsewhere
// does not re-render them.
import { useCallback, useRef, useSyncExternalStore } from "react";

export interface Store<T> {
  get(): T;
  set(change: Partial<T> | ((state: T) => Partial<T>)): void;
  subscribe(listener: () => void): () => void;
}

export function createStore<T extends object>(initial: T): Store<T> {
  let state = initial;
  const listeners = new Set<() => void>();
  return {
    get: () => state,
    set(change) {
      const patch = typeof change === "function" ? change(state) : change;
      if (Object.keys(patch).every((key) => Object.is(patch[key as keyof T], state[key as keyof T]))) return;
      state = { ...state, ...patch };
      for (const listener of listeners) listener();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** The selected part of the store; re-renders only when it changes (Object.is, or `equal`). */
export function useStore<T, S>(store: Store<T>, select: (state: T) => S, equal: (a: S, b: S) => boolean = Object.is): S {
  const last = useRef<{ state: T; select: (state: T) => S; selected: S } | null>(null);
  // A selector may close over props, so a new one is applied even when the state is the same; an equal
  // result keeps the previous value, so React sees no change.
  const getSelected = useCallback(() => {
    const state = store.get();
    const previous = last.current;
    if (previous && previous.state === state && previous.select === select) return previous.selected;
    const fresh = select(state);
    const selected = previous && equal(previous.selected, fresh) ? previous.selected : fresh;
    last.current = { state, select, selected };
    return selected;
  }, [store, select, equal]);
  return useSyncExternalStore(store.subscribe, getSelected);
}

/** Equal when both arrays hold the same items in the same order (for selectors that build arrays). */
export function sameItems<A>(a: readonly A[], b: readonly A[]): boolean {
  return a.length === b.length && a.every((item, i) => Object.is(item, b[i]));
}

/** Equal when both serialise alike (for selectors that pick part of a topic read afresh each time). */
export function sameJson<A>(a: A, b: A): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
