import { attachFailure, attachOutcome } from '../attach';
import { ICluster } from '../types';

const listed = (status: string, error: string | null = null): ICluster =>
  ({ id: 'a1', name: 'Attached', status, error }) as unknown as ICluster;

describe('attachOutcome', () => {
  it('waits while the scheduler is being reached', () => {
    expect(attachOutcome(listed('pending'))).toEqual({ state: 'waiting' });
  });

  it('is attached once the cluster runs', () => {
    expect(attachOutcome(listed('running'))).toEqual({ state: 'attached' });
    expect(attachOutcome(listed('unresponsive'))).toEqual({
      state: 'attached'
    });
  });

  it('failed: says the server reason, in a sentence', () => {
    expect(
      attachOutcome(
        listed(
          'failed',
          'cannot reach the scheduler at tcp://10.0.0.1:8786: timed out after 5 s'
        )
      )
    ).toEqual({
      state: 'failed',
      reason:
        'Cannot reach the scheduler at tcp://10.0.0.1:8786: timed out after 5 s'
    });
    expect(attachOutcome(undefined)).toEqual({
      state: 'failed',
      reason: 'The cluster left the list'
    });
  });

  it('never ends a reason with a bare colon', () => {
    expect(attachFailure('could not start the scheduler at tcp://x:1:')).toBe(
      'Could not start the scheduler at tcp://x:1'
    );
    expect(attachFailure(null)).toBe('The scheduler could not be reached');
    expect(attachFailure(' : ')).toBe('The scheduler could not be reached');
  });
});
