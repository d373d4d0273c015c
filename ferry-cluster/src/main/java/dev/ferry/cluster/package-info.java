/**
 * A parameter-server cluster on ZooKeeper (through Curator): each server's membership node, the
 * controller elected among them that alone writes the {@link dev.ferry.cluster.Assignment}
 * (slot groups to owners, fenced by the controller epoch), and the glue that installs each new
 * assignment into the server's {@link dev.ferry.ps.net.PsServer} and runs the slot moves it
 * orders. Server side only: clients learn the table from the servers and never talk to ZooKeeper.
 */
package dev.ferry.cluster;
