package authzbench;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.elasticsearch.common.logging.LogConfigurator;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.index.mapper.MapperExtrasPlugin;
import org.elasticsearch.join.ParentJoinPlugin;
import org.elasticsearch.node.InternalSettingsPreparer;
import org.elasticsearch.node.Node;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.reindex.ReindexPlugin;
import org.elasticsearch.transport.Netty4Plugin;

/**
 * A single Elasticsearch node from the OSS server jars, without the distribution's launcher: Node's
 * protected constructor takes plugins from the classpath (as the test framework's MockNode does), since
 * Maven Central has the plugin jars but no distribution with a plugins/ dir. Settings come as key=value
 * arguments. SIGTERM closes the node cleanly through a shutdown hook.
 */
public final class EsNode extends Node {
    private static final List<Class<? extends Plugin>> PLUGINS = Arrays.asList(
        Netty4Plugin.class, MapperExtrasPlugin.class, ReindexPlugin.class, ParentJoinPlugin.class);

    private EsNode(Settings settings, Path configDir) {
        super(InternalSettingsPreparer.prepareEnvironment(settings, Collections.emptyMap(), configDir,
            () -> "authzbench"), PLUGINS, true);
    }

    public static void main(String[] args) throws Exception {
        Settings.Builder b = Settings.builder();
        for (String a : args) {
            int eq = a.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected key=value, got " + a);
            }
            b.put(a.substring(0, eq), a.substring(eq + 1));
        }
        Settings settings = b.build();
        LogConfigurator.configureWithoutConfig(settings);  // log4j to stdout, which the provisioner logs
        Path config = Path.of(settings.get("path.home")).resolve("config");
        EsNode node = new EsNode(settings, config);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            }
            stopped.countDown();
        }, "authzbench-shutdown"));
        node.start();
        if (Boolean.getBoolean("authzbench.exitAfterStart")) {
            System.exit(0);  // the AppCDS training run: start once, then dump the loaded classes at exit
        }
        stopped.await();  // Node's threads are daemons: keep the JVM alive until SIGTERM
    }
}
