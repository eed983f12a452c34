/** Hooks shared by the views. */
import { useEffect, useRef } from 'preact/hooks';

/**
 * Runs `tick` now and then `everyMs` after each run finishes, until the component goes
 * away: calls never overlap, so a slow node is asked no faster than it answers.
 */
export function usePoll(tick: () => Promise<void>, everyMs: number, deps: unknown[] = []): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async (): Promise<void> => {
      try {
        await latest.current();
      } finally {
        if (!stopped) timer = setTimeout(() => void run(), everyMs);
      }
    };
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [everyMs, ...deps]);
}
