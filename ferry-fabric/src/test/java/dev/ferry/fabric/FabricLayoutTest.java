package dev.ferry.fabric;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The struct layouts of {@link InfoDescriptor}, checked without a C compiler: every field Ferry
 * reads from every {@code fi_info} this machine's libfabric returns must equal what libfabric
 * itself prints for it with {@code fi_tostr}.
 */
@Timeout(60)
class FabricLayoutTest {

    @Test
    void everyFieldMatchesLibfabricsOwnRendering() {
        int infos = 0;
        int fields = 0;
        Hints any = new Hints(null, EndpointType.UNSPEC, 0, Fi.CONTEXT | Fi.CONTEXT2, Fi.MR_MODES_SUPPORTED,
                Fi.THREAD_UNSPEC, null, null, false);
        try (InfoList list = InfoList.query(any)) {
            assertTrue(list.entries().size() >= 2, "libfabric lists no providers");
            for (FabricInfo info : list.entries()) {
                Map<String, String> printed = parse(info.describe());
                String where = info.toString();
                fields += check(printed, "fi_fabric_attr.prov_name", info.provider(), where);
                fields += check(printed, "fi_fabric_attr.name", info.fabricName(), where);
                fields += check(printed, "fi_domain_attr.name", info.domainName(), where);
                fields += check(printed, "fi_ep_attr.type", "FI_EP_" + info.endpointType(), where);
                fields += check(printed, "fi_ep_attr.max_msg_size", Long.toUnsignedString(info.maxMessageSize()), where);
                fields += check(printed, "fi_tx_attr.inject_size", Long.toString(info.injectSize()), where);
                fields += check(printed, "fi_tx_attr.size", Long.toString(info.txSize()), where);
                fields += check(printed, "fi_rx_attr.size", Long.toString(info.rxSize()), where);
                fields += check(printed, "fi_domain_attr.mr_key_size", Long.toString(info.mrKeySize()), where);
                fields += check(printed, "fi_domain_attr.cq_data_size", Long.toString(info.cqDataSize()), where);
                fields += check(printed, "src_addrlen", Integer.toString(info.sourceAddress().length), where);
                fields += check(printed, "dest_addrlen", Integer.toString(info.destinationAddress().length), where);
                assertEquals(names(printed.get("fi_domain_attr.mr_mode")), mrModeNames(info.mrMode()),
                        "mr_mode of " + where);
                fields++;
                infos++;
            }
        }
        System.out.println("compared " + fields + " fields of " + infos + " fi_info entries with fi_tostr");
    }

    private static int check(Map<String, String> printed, String key, String actual, String where) {
        assertTrue(printed.containsKey(key), "fi_tostr has no " + key + " for " + where);
        assertEquals(printed.get(key), actual, key + " of " + where);
        return 1;
    }

    /** "section.key" to value, from fi_tostr's indented YAML-like text. */
    private static Map<String, String> parse(String text) {
        Map<String, String> map = new HashMap<>();
        String section = "";
        for (String line : text.split("\n")) {
            String trimmed = line.strip();
            int colon = trimmed.indexOf(':');
            if (colon < 0) {
                continue;
            }
            String key = trimmed.substring(0, colon);
            String value = trimmed.substring(colon + 1).strip();
            int indent = line.length() - line.stripLeading().length();
            if (value.isEmpty() && key.startsWith("fi_")) {
                section = indent <= 4 && !key.equals("fi_info") ? key + "." : section;
                if (key.equals("fi_info")) {
                    section = "";
                }
                continue;
            }
            if (indent <= 4) {
                section = "";
            }
            map.putIfAbsent(section + key, value);
        }
        return map;
    }

    private static Set<String> names(String bracketed) {
        Set<String> set = new TreeSet<>();
        for (String part : bracketed.replace("[", "").replace("]", "").split(",")) {
            String name = part.strip();
            if (!name.isEmpty()) {
                set.add(name.startsWith("FI_") ? name.substring(3) : name);
            }
        }
        return set;
    }

    private static Set<String> mrModeNames(int mrMode) {
        Set<String> set = new TreeSet<>();
        if (mrMode != 0) {
            for (String name : Fi.mrModeNames(mrMode).split("\\|")) {
                set.add(name);
            }
        }
        return set;
    }
}
