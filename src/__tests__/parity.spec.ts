/**
 * The sidebar's rules give the answers of tests/parity_cases.json, the cases
 * the server's tests (tests/test_parity.py) also read.
 */
import cases from '../../tests/parity_cases.json';
import { capRefusal, ICaps, limitWarnings } from '../limits';
import { groupRequest, IGroupDraft, workersFor } from '../spec';
import { checkAmount, checkCount, checkSize } from '../validate';

interface ISizeCase {
  text: string;
  bytes: number | null;
  allow_zero?: boolean;
  sidebar?: null;
}

interface ICountCase {
  text: string;
  minimum: number;
  sent: number | string;
  value: number | null;
}

interface IWorkersCase {
  threads: number;
  memory: string;
  unit: 'workers' | 'cores' | 'memory';
  amount: string;
  workers: number;
}

interface ICapsCase {
  about: string;
  caps: ICaps;
  groups: {
    name: string;
    count: number;
    threads: number;
    memory: number;
    gpus: number;
  }[];
  groups_field?: string;
  refused: { cap: string; field: string } | null;
}

interface IMaxWorkersCase {
  counts: number[];
  max_workers: number;
  refused: boolean;
}

const draft = (count: string): IGroupDraft => ({
  name: 'g',
  count,
  threads: '1',
  memory: '1 GiB',
  gpus: '0'
});

describe('sizes', () => {
  it.each(cases.sizes as ISizeCase[])(
    'reads $text as the server does',
    (c: ISizeCase) => {
      // Given a size as typed, When the sidebar checks it
      const checked = checkSize(c.text, { allowZero: c.allow_zero ?? false });
      // Then it has the server's bytes, or refuses it (only ever stricter)
      const expected = 'sidebar' in c ? c.sidebar : c.bytes;
      expect(checked.value).toBe(expected);
      expect(checked.error === null).toBe(expected !== null);
    }
  );

  it('is stricter than the server only where a case says why', () => {
    for (const c of cases.sizes as (ISizeCase & { why?: string })[]) {
      if ('sidebar' in c) {
        expect(c.sidebar).toBeNull();
        expect(c.why).toBeTruthy();
      }
    }
  });
});

describe('counts', () => {
  it.each(cases.counts as ICountCase[])(
    'checks $text as the server reads what is sent',
    (c: ICountCase) => {
      // Given a count as typed in a group's field
      // When the sidebar checks it and builds the request
      const checked = checkCount(c.text, 'workers', c.minimum);
      const request = groupRequest(draft(c.text));
      // Then it has the server's answer, and sends what the server reads so
      expect(checked.value).toBe(c.value);
      expect(request.count).toBe(c.sent);
    }
  );
});

describe('workers for a target', () => {
  it.each(cases.workers_for as IWorkersCase[])(
    '$amount $unit of $threads threads, $memory each: $workers workers',
    (c: IWorkersCase) => {
      // Given a group and a target as typed
      const memory = checkSize(c.memory).value;
      const amount = checkAmount(c.unit, c.amount).value;
      expect(memory).not.toBeNull();
      expect(amount).not.toBeNull();
      // When the preview resolves it, Then it needs the workers the server resolves
      const perWorker = { threads: c.threads, memory: memory!, gpus: 0 };
      expect(workersFor(perWorker, c.unit, amount!)).toBe(c.workers);
    }
  );
});

describe('caps', () => {
  it.each(cases.caps as ICapsCase[])('$about', (c: ICapsCase) => {
    // Given the server's caps and a plan of worker groups
    // When the sidebar checks the plan against them
    const refusal = capRefusal(c.groups, c.caps, 'spec', c.groups_field);
    // Then it refuses it for the cap the server names, at the same field
    expect(refusal && { cap: refusal.cap, field: refusal.field }).toEqual(
      c.refused
    );
  });
});

describe('the worker limit', () => {
  it.each(cases.max_workers as IMaxWorkersCase[])(
    '$counts workers under a limit of $max_workers',
    (c: IMaxWorkersCase) => {
      // Given a plan of groups with these worker counts
      const workers = c.counts.reduce((a, b) => a + b, 0);
      const limits = {
        max_workers: c.max_workers,
        max_clusters: 1,
        machine: { cores: 1, memory: 1 }
      };
      // When the sidebar previews it (batch workers: no machine warnings)
      const warnings = limitWarnings(
        { workers, cores: 0, memory: 0, gpus: 0 },
        limits,
        false
      );
      // Then it says the server refuses it exactly when the server does
      expect(warnings.length > 0).toBe(c.refused);
    }
  );
});
