import { opensElsewhere } from '../externaldashboard';

describe('opensElsewhere', () => {
  it('keeps a dashboard of this server in a JupyterLab tab', () => {
    expect(opensElsewhere('/user/a/clustermgr/dashboard/ab12/k3y/status')).toBe(
      false
    );
    expect(opensElsewhere('clustermgr/dashboard/ab12/status')).toBe(false);
  });

  it("opens a gateway's dashboard route at its own address", () => {
    expect(opensElsewhere('http://127.0.0.1:8000/clusters/0f1e/status')).toBe(
      true
    );
    expect(opensElsewhere('/services/dask-gateway/clusters/0f1e/status')).toBe(
      true
    );
  });

  it('has nothing to open without a dashboard', () => {
    expect(opensElsewhere(null)).toBe(false);
    expect(opensElsewhere(undefined)).toBe(false);
  });
});
