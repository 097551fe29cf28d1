import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';

export const HEALTH_PROTO = path.join('grpc', 'health', 'v1', 'health.proto');

interface HealthCheckRequest {
  service: string;
}
interface HealthCheckResponse {
  status: string;
}

/**
 * grpc.health.v1.Health for the whole coordinator and each of its services: SERVING once ready,
 * NOT_SERVING while draining. Unknown service names answer NOT_FOUND (Check) or SERVICE_UNKNOWN (Watch).
 */
export class HealthService {
  private status: ServingStatus = 'NOT_SERVING';
  private readonly watchers = new Set<{
    service: string;
    call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>;
  }>();

  constructor(private readonly services: readonly string[]) {}

  addToServer(server: grpc.Server, protosDir: string): void {
    const definition = protoLoader.loadSync(HEALTH_PROTO, {
      includeDirs: [protosDir],
      keepCase: true,
      enums: String,
      defaults: true,
    });
    const service = definition['grpc.health.v1.Health'] as grpc.ServiceDefinition;
    server.addService(service, {
      Check: (
        call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
        callback: grpc.sendUnaryData<HealthCheckResponse>,
      ) => {
        const name = call.request.service ?? '';
        if (!this.knows(name)) {
          callback({ code: grpc.status.NOT_FOUND, details: `unknown service '${name}'` });
          return;
        }
        callback(null, { status: this.status });
      },
      List: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const statuses: Record<string, HealthCheckResponse> = { '': { status: this.status } };
        for (const name of this.services) statuses[name] = { status: this.status };
        callback(null, { statuses });
      },
      Watch: (call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const name = call.request.service ?? '';
        call.write({ status: this.knows(name) ? this.status : 'SERVICE_UNKNOWN' });
        const watcher = { service: name, call };
        this.watchers.add(watcher);
        call.on('cancelled', () => this.watchers.delete(watcher));
        call.on('close', () => this.watchers.delete(watcher));
      },
    });
  }

  setStatus(status: ServingStatus): void {
    if (status === this.status) return;
    this.status = status;
    for (const watcher of this.watchers) {
      if (this.knows(watcher.service)) watcher.call.write({ status });
    }
  }

  get current(): ServingStatus {
    return this.status;
  }

  /** Ends every Watch stream so that a draining server is not held open by health watchers. */
  endWatches(): void {
    for (const watcher of this.watchers) watcher.call.end();
    this.watchers.clear();
  }

  private knows(service: string): boolean {
    return service === '' || this.services.includes(service);
  }
}
