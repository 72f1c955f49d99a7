// The parts of undici Levee uses, each required from its own file. undici's entry point loads the
// whole library (fetch, WebSocket, EventSource, the cache stores, the mock agents, every
// interceptor), and every worker thread loads it again: a thread that imported the entry point
// grew the process by 20.3–20.6 MB, one that imported these by 9.7–10.0 (Node 24, undici 8.13).
//
// The entry point does one thing besides exporting that these need: it puts the request API
// (request, stream, pipeline, upgrade, connect) on Dispatcher's prototype, which Pool and
// BalancedPool inherit; it is done here the same way. test/unit/undici.test.ts checks that these
// are the entry point's own classes and functions, so an undici that moves its files fails there.
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);

const Dispatcher = require('undici/lib/dispatcher/dispatcher') as typeof Undici.Dispatcher;
Object.assign(Dispatcher.prototype, require('undici/lib/api') as object);

export const Pool = require('undici/lib/dispatcher/pool') as typeof Undici.Pool;
export const BalancedPool = require('undici/lib/dispatcher/balanced-pool') as typeof Undici.BalancedPool;
export const buildConnector = require('undici/lib/core/connect') as typeof Undici.buildConnector;
export const errors = require('undici/lib/core/errors') as typeof Undici.errors;

export type Pool = Undici.Pool;
export type BalancedPool = Undici.BalancedPool;
export type Dispatcher = Undici.Dispatcher;
export type Connector = Undici.buildConnector.connector;
