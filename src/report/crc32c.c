/* CRC-32C a bit at a time (crc32c.h), reflected polynomial 0x82F63B78. Event files are small
 * (a record a logged step): eight shifts a byte cost nothing next to the protobuf encoding, and
 * there is no table to fill (no state). */
#include "report/crc32c.h"

uint32_t tr_crc32c(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? crc >> 1 ^ 0x82F63B78u : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
}

uint32_t tr_crc32c_mask(uint32_t crc)
{
    return (crc >> 15 | crc << 17) + 0xA282EAD8u;
}
