import { clientCode } from '../clientcode';
import { ICluster } from '../types';

const cluster = (
  name: string,
  scheduler_address: string,
  tls: ICluster['tls']
): Pick<ICluster, 'id' | 'name' | 'scheduler_address' | 'tls'> => ({
  id: '3f9c2a1b',
  name,
  scheduler_address,
  tls
});

// The same text is executed in a real kernel by tests/test_client_cli.py.
const EXPECTED = [
  'import clustermgr_lab',
  'from distributed import Client',
  'if isinstance(globals().get("client"), Client):',
  '    client.close()  # the client of a cell inserted before',
  'if isinstance(globals().get("cluster"), clustermgr_lab.JupyterServerCluster):',
  '    cluster.close()  # lets go of the cluster of a cell inserted before; it keeps running',
  'cluster = clustermgr_lab.get_cluster("keep-me")',
  'client = Client(cluster)',
  'cluster'
].join('\n');

describe('clientCode', () => {
  it('makes the Cluster object by the name the card shows and a Client of it, replacing the previous ones, then shows the cluster', () => {
    // Given a cluster named "keep-me" (id 3f9c2a1b)
    const tls = { ca_file: '/ca.pem', cert: '/cert.pem', key: '/key.pem' };
    // Then its code names it, not its id, and ends with `cluster` (shown when run)
    expect(clientCode(cluster('keep-me', 'tls://127.0.0.1:1', tls))).toBe(
      EXPECTED
    );
  });

  it('names a cluster started elsewhere the same way: the server knows its address', () => {
    expect(clientCode(cluster('keep-me', 'tcp://127.0.0.1:2', null))).toBe(
      EXPECTED
    );
  });

  it('quotes a name as a Python string', () => {
    expect(clientCode(cluster('a"b\\c', 'tcp://127.0.0.1:2', null))).toContain(
      'cluster = clustermgr_lab.get_cluster("a\\"b\\\\c")'
    );
  });
});
