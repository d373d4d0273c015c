/** Flow-control building blocks shared by the transports. */
package dev.ferry.transport.flow;
