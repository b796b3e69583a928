/* CRC-32C a byte at a time from a 256-entry table (crc32c.h). Event files are small; the
 * table costs nothing next to the protobuf encoding. */
#include "report/crc32c.h"

static uint32_t table[256];

static void fill_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? c >> 1 ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
}

uint32_t tr_crc32c(const void *data, size_t n)
{
    if (!table[1])
        fill_table();   /* the same table every time: a race only writes equal values */
    const uint8_t *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ crc >> 8;
    return crc ^ 0xFFFFFFFFu;
}

uint32_t tr_crc32c_mask(uint32_t crc)
{
    return (crc >> 15 | crc << 17) + 0xA282EAD8u;
}
