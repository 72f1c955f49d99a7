// The frames of the events being dispatched now, shared by every watcher an event is offered to.
//
// A store event is offered to all its watchers in one synchronous dispatch (watch/registry.ts),
// so its frame in a representation is made once, by the first of them, and sent as is to the
// others. Kept past the dispatch, as long as the event itself (the store's event window keeps
// events 75 s, for watches that resume), each frame would be a second copy of the object's
// bytes for the whole window: at 100 updates/s of 11 KiB pods, 7,500 events and ~86 MB of
// frames per representation in use, in every thread (7,500 such events in a window, each framed
// once: 15,008 buffers alive with the frames kept with their events, 7,571 with these). A watch
// that resumes from the window makes the frames of the events it replays again, for itself.
import type { StoreEvent } from '../store/events.ts';

/** Events whose frames are kept: more than one dispatch ever needs at once (a relist's changes go one by one). */
const RECENT_EVENTS = 64;

/** Frames by event and by key (representation and type), for the last few events only. */
export class RecentFrames<F> {
  readonly #byEvent = new Map<StoreEvent, Map<string, F>>();
  readonly #capacity: number;

  constructor(capacity = RECENT_EVENTS) {
    this.#capacity = capacity;
  }

  get(event: StoreEvent, key: string): F | undefined {
    return this.#byEvent.get(event)?.get(key);
  }

  set(event: StoreEvent, key: string, frame: F): void {
    let byKey = this.#byEvent.get(event);
    if (!byKey) {
      // A Map iterates in insertion order: the first key is the event seen longest ago.
      if (this.#byEvent.size >= this.#capacity) this.#byEvent.delete(this.#byEvent.keys().next().value!);
      byKey = new Map<string, F>();
      this.#byEvent.set(event, byKey);
    }
    byKey.set(key, frame);
  }

  /** Events whose frames are held now. */
  get size(): number {
    return this.#byEvent.size;
  }
}
