/** Smoke: a three-node and a one-node cluster elect a leader and commit proposals. */
import { describe, expect, it } from 'vitest';
import { bytes, Cluster, text } from '../interaction/cluster.js';

describe('raft smoke', () => {
  it('three nodes elect one leader and replicate a proposal', () => {
    const c = new Cluster(['n1', 'n2', 'n3']);
    c.campaign('n1');
    expect(c.leaders()).toEqual(['n1']);
    const result = c.raft('n1').propose(bytes('x'), 5);
    expect(result).toEqual({ kind: 'proposed', index: 2, term: 1 });
    c.deliverAll();
    c.tickAll(1);
    for (const id of ['n1', 'n2', 'n3']) {
      const node = c.node(id);
      expect(node.applied.map((e) => e.type === 'empty' ? '-' : text(e.data))).toEqual(['-', 'x']);
    }
  });

  it('a single voter elects itself on the first tick and commits on its own persistence', () => {
    const c = new Cluster(['n1']);
    c.tick('n1');
    expect(c.raft('n1').status().role).toBe('leader');
    c.processAll();
    expect(c.node('n1').appliedIndex).toBe(1);
    c.raft('n1').propose(bytes('a'), 1);
    c.processAll();
    expect(c.node('n1').appliedIndex).toBe(2);
  });
});
