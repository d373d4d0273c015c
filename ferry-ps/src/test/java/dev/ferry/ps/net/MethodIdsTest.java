package dev.ferry.ps.net;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import dev.ferry.rpc.RpcMethod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every RPC method the parameter server defines has an id of its own. An RPC server keeps one
 * handler per id, so two methods on one id (a slot move's {@code MOVE_DENSE} and the export's
 * {@code EXPORT_TABLES} once shared 0x5201) silently send one's requests to the other's handler.
 * Reads every class of this package, so a method added in a new class is checked too.
 */
class MethodIdsTest {

    @Test
    void everyMethodHasItsOwnId() throws IOException, URISyntaxException, ReflectiveOperationException {
        Path classes = Path.of(PsServer.class.getProtectionDomain().getCodeSource().getLocation().toURI())
                .resolve("dev/ferry/ps/net");
        List<String> names;
        try (Stream<Path> files = Files.list(classes)) {
            names = files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".class"))
                    .map(n -> "dev.ferry.ps.net." + n.substring(0, n.length() - ".class".length())).sorted().toList();
        }
        Map<Integer, String> byId = new HashMap<>();
        List<String> clashes = new ArrayList<>();
        for (String name : names) {
            Class<?> type = Class.forName(name, false, PsServer.class.getClassLoader());
            for (Field field : type.getDeclaredFields()) {
                int modifiers = field.getModifiers();
                if (field.getType() != RpcMethod.class || !Modifier.isStatic(modifiers) || !Modifier.isFinal(modifiers)) {
                    continue;
                }
                field.setAccessible(true);
                RpcMethod method = (RpcMethod) field.get(null);
                String here = type.getSimpleName() + "." + field.getName();
                String before = byId.putIfAbsent(method.id(), here);
                if (before != null) {
                    clashes.add(String.format("0x%x: %s and %s", method.id(), before, here));
                }
            }
        }
        assertTrue(byId.size() >= 15, "found only " + byId + " in " + classes);
        assertEquals(List.of(), clashes, "RPC methods sharing an id");
    }
}
