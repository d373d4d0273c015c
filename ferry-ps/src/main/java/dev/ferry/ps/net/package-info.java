/**
 * The parameter server on the wire: {@link dev.ferry.ps.net.PsDescriptor} (methods and body
 * layouts), {@link dev.ferry.ps.net.PsServer} (a {@link dev.ferry.ps.ParameterServer} behind an
 * RPC server), {@link dev.ferry.ps.net.PsClient} (batched, routed, parallel pulls and pushes),
 * and the processes: {@link dev.ferry.ps.net.PsServerMain} runs one server,
 * {@link dev.ferry.ps.net.LocalCluster} starts several as child processes and stops them by PID.
 */
package dev.ferry.ps.net;
