package dev.ferry.transport.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.ServerChannelRecvByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.Test;

/** The tunables whose value is a fix, each checked against Netty's behaviour without it. */
class NettyTuningTest {

    /**
     * Accepts in one turn of the listening socket's loop, the way Netty's server channels drive
     * the handle: each accept "attempts" 1 and "reads" a descriptor number.
     */
    private static int acceptsPerTurn(RecvByteBufAllocator allocator, int backlog) {
        EmbeddedChannel channel = new EmbeddedChannel();
        try {
            RecvByteBufAllocator.ExtendedHandle handle = (RecvByteBufAllocator.ExtendedHandle) allocator.newHandle();
            handle.reset(channel.config());
            int accepted = 0;
            do {
                handle.attemptedBytesRead(1);
                handle.lastBytesRead(accepted < backlog ? 100 + accepted : -1);
                if (handle.lastBytesRead() == -1) {
                    break;
                }
                handle.incMessagesRead(1);
                accepted++;
            } while (handle.continueReading());
            handle.readComplete();
            return accepted;
        } finally {
            channel.finishAndReleaseAll();
        }
    }

    @Test
    void theListeningSocketDrainsItsBacklogInOneTurn() {
        ServerChannelRecvByteBufAllocator nettyDefault = new ServerChannelRecvByteBufAllocator();
        nettyDefault.maxMessagesPerRead(16); // what a server channel's metadata sets
        assertEquals(1, acceptsPerTurn(nettyDefault, 64), "Netty's default: one accept per turn");
        assertEquals(64, acceptsPerTurn(NettyTuning.acceptAllocator(), 64));
        assertEquals(NettyTuning.ACCEPTS_PER_TURN, acceptsPerTurn(NettyTuning.acceptAllocator(), 1_000));
        assertEquals(3, acceptsPerTurn(NettyTuning.acceptAllocator(), 3));
    }
}
